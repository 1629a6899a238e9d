"""A reusable AWS CDK construct: SQS -> Lambda -> DynamoDB (exactly once) -> SNS (at least once)."""
