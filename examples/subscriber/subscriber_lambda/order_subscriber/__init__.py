"""An SQS-subscribed Lambda that acts once per order notification (example; see ../../README.md)."""
