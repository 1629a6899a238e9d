"""The consumer Lambda of the order pipeline (entry point: ``order_consumer.handler.handler``)."""
