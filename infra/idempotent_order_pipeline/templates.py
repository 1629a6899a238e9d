"""Synthesized CloudFormation templates made reviewable: hashes masked, JSON bodies expanded, keys sorted.

:func:`normalized` is what :func:`idempotent_order_pipeline.testing.snapshot_template` returns for a
stack, and what ``order-pipeline upgrade-check`` compares (so a snapshot committed in that form is a
valid "before"). It imports nothing of the CDK:

* every 64-hex asset hash in a string (a function's ``S3Key``, a layer's, an asset path) becomes
  :data:`ASSET_MASK`: the library's code and the team's own change the hashes at every release,
  while the library version the template records (:mod:`idempotent_order_pipeline.library_version`)
  is kept, so a code change of the library shows as that one line;
* the bootstrap version parameter and rule (they follow the CDK version) become :data:`BOOTSTRAP_MASK`;
* a string that holds a JSON object or array (a dashboard's ``DashboardBody``, an event's input), or
  an ``Fn::Join`` with an empty delimiter that builds one from strings and tokens (``Ref``,
  ``Fn::GetAtt``, ...), becomes the object it holds, the tokens kept where they stand (a string mixing
  text and tokens becomes an ``Fn::Join`` of its pieces): a snapshot is for reading, not deploying;
* every mapping's keys are sorted.

It is idempotent: normalizing a normalized template changes nothing.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

#: A CDK asset hash (SHA-256, lowercase hex): in ``S3Key`` values, asset paths and logical ids of assets.
ASSET_HASH = re.compile(r"\b[0-9a-f]{64}\b")
ASSET_MASK = "<asset-hash>"
BOOTSTRAP_MASK = "<bootstrap-version>"
# A token's stand-in while a joined body is parsed: private-use characters JSON text never needs.
_TOKEN = re.compile("\ue000(\\d+)\ue001")


def normalized(template: Mapping[str, Any], *, mask: bool = True) -> dict[str, Any]:
    """``template`` (a synthesized or deployed CloudFormation template) as the module docstring says;
    ``mask=False`` keeps the hashes and the bootstrap version (bodies are expanded, keys sorted)."""
    result: dict[str, Any] = _normal(template, mask)
    if not mask:
        return result
    for section, name in (("Parameters", "BootstrapVersion"), ("Rules", "CheckBootstrapVersion")):
        if isinstance(result.get(section), dict) and name in result[section]:
            result[section][name] = BOOTSTRAP_MASK
    return result


def mask_hashes(text: str) -> str:
    """``text`` with every asset hash replaced by :data:`ASSET_MASK`."""
    return ASSET_HASH.sub(ASSET_MASK, text)


def _normal(value: Any, mask: bool) -> Any:
    if isinstance(value, str):
        body = _json_body(value)
        if body is not None:
            return _normal(body, mask)
        return mask_hashes(value) if mask else value
    if isinstance(value, list):
        return [_normal(item, mask) for item in value]
    if isinstance(value, Mapping):
        if set(value) == {"Fn::Join"}:
            body = _joined_json_body(value["Fn::Join"])
            if body is not None:
                return _normal(body, mask)
        return {str(key): _normal(value[key], mask) for key in sorted(value, key=str)}
    return value


def _json_body(text: str) -> dict[str, Any] | list[Any] | None:
    """The object or array ``text`` holds as JSON, else None."""
    if not text.lstrip().startswith(("{", "[")):
        return None
    try:
        parsed = json.loads(text)
    except ValueError:
        return None
    return parsed if isinstance(parsed, dict | list) else None


def _joined_json_body(join: Any) -> dict[str, Any] | list[Any] | None:
    """The object or array an ``Fn::Join`` with an empty delimiter builds, tokens kept in place; else None."""
    if not (isinstance(join, list) and len(join) == 2 and join[0] == "" and isinstance(join[1], list)):
        return None
    tokens: list[Any] = []
    text = ""
    for part in join[1]:
        if isinstance(part, str):
            if _TOKEN.search(part):
                return None
            text += part
        else:
            text += f"\ue000{len(tokens)}\ue001"
            tokens.append(part)
    body = _json_body(text)
    if body is None or _TOKEN.search(json.dumps(_keys(body), ensure_ascii=False)):
        return None  # a token outside a JSON string or in a key (or no JSON at all): shown as it is
    restored: dict[str, Any] | list[Any] = _restore(body, tokens)
    return restored


def _keys(value: Any) -> list[str]:
    """Every mapping key in ``value``, at any depth."""
    if isinstance(value, dict):
        return [*value, *(key for item in value.values() for key in _keys(item))]
    if isinstance(value, list):
        return [key for item in value for key in _keys(item)]
    return []


def _restore(value: Any, tokens: list[Any]) -> Any:
    """``value`` with every token stand-in put back: a whole string becomes its token, a mixed one an ``Fn::Join``."""
    if isinstance(value, str):
        pieces = _TOKEN.split(value)
        if len(pieces) == 1:
            return value
        parts: list[Any] = [tokens[int(piece)] if i % 2 else piece for i, piece in enumerate(pieces)]
        parts = [part for part in parts if part != ""]
        return parts[0] if len(parts) == 1 else {"Fn::Join": ["", parts]}
    if isinstance(value, list):
        return [_restore(item, tokens) for item in value]
    if isinstance(value, dict):
        return {key: _restore(item, tokens) for key, item in value.items()}
    return value
