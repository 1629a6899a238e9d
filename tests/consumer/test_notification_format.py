"""``NotificationFormat``: the attribute names SNS accepts, and the format as the functions' environment carries it."""

from __future__ import annotations

import pytest

from idempotent_order_pipeline._lambda_asset.order_consumer.contract.notification import (
    NotificationFormat,
    attribute_name_problem,
)


@pytest.mark.parametrize(
    ("path", "problem"),
    [
        ("country", None),
        ("customer.tier", None),
        ("a-b_c.9", None),
        ("customer..tier", "is not an SNS attribute name"),
        (".country", "is not an SNS attribute name"),
        ("country.", "is not an SNS attribute name"),
        ("AWS.region", "is not an SNS attribute name"),
        ("amazon.x", "is not an SNS attribute name"),
        ("total €", "is not an SNS attribute name"),
        ("x" * 257, "is not an SNS attribute name"),
        ("order_id", "is always sent; list only other fields"),
    ],
)
def test_an_attribute_path_is_refused_naming_the_rule_it_breaks(path: str, problem: str | None) -> None:
    # GIVEN a configured field path / WHEN it is checked
    found = attribute_name_problem(path)
    # THEN a name SNS accepts has no problem; any other names the path and the rule
    if problem is None:
        assert found is None
    else:
        assert found is not None
        assert found.startswith(f"{path!r} {problem}")


def test_the_environment_carries_the_paths_as_a_json_array_or_nothing() -> None:
    # GIVEN a format with two paths and a format with none
    with_paths = NotificationFormat(attributes=("country", "customer.tier"))
    without = NotificationFormat()
    # WHEN each is written to NOTIFICATION_ATTRIBUTES
    texts = (with_paths.attributes_text(), without.attributes_text())
    # THEN the paths are a JSON array, no paths the empty string, and each reads back as the same format
    assert texts == ('["country", "customer.tier"]', "")
    assert NotificationFormat.parse(texts[0], "") == with_paths
    assert NotificationFormat.parse(texts[1], None) == without


def test_a_format_the_environment_gets_wrong_is_a_value_error_naming_every_problem() -> None:
    # GIVEN NOTIFICATION_ATTRIBUTES with a bad name and NOTIFICATION_BODY with an unknown body
    # WHEN / THEN the format is refused, naming both
    with pytest.raises(ValueError, match=r"'a\.\.b' is not an SNS attribute name.*; body 'full': allowed thin, order"):
        NotificationFormat.parse('["a..b"]', "full")
