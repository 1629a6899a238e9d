"""The Lambda context the benchmark hands every handler.

Free of imports: the cold-start probe (:mod:`bench.coldstart`) imports it before its timer starts, so
that the first invocation it times is the product's alone.
"""


class Context:
    """The Lambda context attributes the handlers read."""

    function_name = "order-consumer"
    function_version = "$LATEST"
    memory_limit_in_mb = 512
    invoked_function_arn = "arn:aws:lambda:us-east-1:123456789012:function:order-consumer"
    aws_request_id = "00000000-0000-4000-8000-000000000000"
    log_group_name = "/aws/lambda/order-consumer"
    log_stream_name = "bench"

    def get_remaining_time_in_millis(self) -> int:
        return 60_000
