"""The consumer's SQS event source, with the mapping's logical id independent of how the queue is granted.

With a customer-managed key, the construct hands the event source a keyless view of its queue
(``Queue.from_queue_attributes``), so that the grant adds no unconditioned ``kms:Decrypt`` (the role's
key statement scoped to the queue is what polling needs). CDK's ``SqsEventSource`` names the mapping
``SqsEventSource:<unique id of the queue it is given>``, so that view gave the mapping a new logical id
(``...EventSourceQueue...`` instead of 0.2.0's ``...Queue...``): an upgrade removed the deployed mapping
and added a new one on the same queue and function, which Lambda refuses while the first exists.

:class:`QueueEventSource` is ``SqsEventSource`` on the queue itself, so the mapping keeps the id it
always had, with the grant made through the view it is given.
"""

from __future__ import annotations

from typing import Any

from aws_cdk import Names, aws_lambda, aws_lambda_event_sources, aws_sqs


class QueueEventSource(aws_lambda_event_sources.SqsEventSource):
    """``SqsEventSource(queue, **props)`` whose consume grant goes to ``grant_through`` instead of ``queue``."""

    def __init__(self, queue: aws_sqs.IQueue, *, grant_through: aws_sqs.IQueue, **props: Any) -> None:
        super().__init__(queue, **props)
        self._queue = queue
        self._grant_through = grant_through
        self._props = props
        self._mapping: aws_lambda.EventSourceMapping | None = None

    def bind(self, target: aws_lambda.IFunction) -> None:
        """What ``SqsEventSource.bind`` does (aws-cdk-lib 2.275), the grant through the keyless view."""
        props = self._props
        self._mapping = target.add_event_source_mapping(
            f"SqsEventSource:{Names.node_unique_id(self._queue.node)}",
            event_source_arn=self._queue.queue_arn,
            batch_size=props.get("batch_size"),
            max_batching_window=props.get("max_batching_window"),
            max_concurrency=props.get("max_concurrency"),
            report_batch_item_failures=props.get("report_batch_item_failures"),
            enabled=props.get("enabled"),
            filters=props.get("filters"),
            filter_encryption=props.get("filter_encryption"),
            metrics_config=props.get("metrics_config"),
            provisioned_poller_config=props.get("provisioned_poller_config"),
        )
        if target.role is not None:
            self._grant_through.grant_consume_messages(target)

    @property
    def event_source_mapping_id(self) -> str:
        if self._mapping is None:
            raise RuntimeError("QueueEventSource is not bound to a function yet")
        return self._mapping.event_source_mapping_id

    @property
    def event_source_mapping_arn(self) -> str:
        if self._mapping is None:
            raise RuntimeError("QueueEventSource is not bound to a function yet")
        return self._mapping.event_source_mapping_arn
