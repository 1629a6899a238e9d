"""The PartiQL ``UPDATE`` subset the moto fix reads (:mod:`.moto_patches`, point 7), parsed without moto.

Standard library only, so that what reads the consumer's statements (the fix, the tests' request meters
and the explorer's world) does not import moto's CloudFormation and every backend it pulls in.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

#: One token of the PartiQL subset the fix reads: a quoted name, a string literal, a parameter, a
#: number, a bare word, or ``=`` / ``,``.
PARTIQL_TOKEN = re.compile(
    r"""\s*(?:(?P<name>"(?:[^"]|"")*")|(?P<string>'(?:[^']|'')*')|(?P<parameter>\?)"""
    r"""|(?P<number>-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?)|(?P<word>[A-Za-z_]\w*)|(?P<operator>[=,]))"""
)


class NotTheSubset(Exception):
    """A statement outside the subset the fix reads: moto's own code runs it."""


@dataclass
class PartiqlUpdate:
    """An ``UPDATE`` statement of the subset, as moto's ``update_item`` takes it."""

    table: str
    #: The WHERE clause's equalities, in order: (attribute, value).
    where: list[tuple[str, dict[str, Any]]]
    #: The SET clauses' assignments, in order: (attribute, value).
    assignments: list[tuple[str, dict[str, Any]]]
    removals: list[str]

    def request(self, hash_key: str, range_key: str | None) -> dict[str, Any]:
        """``update_item``'s keyword arguments for a table with these keys."""
        key_names = [hash_key] if range_key is None else [hash_key, range_key]
        key = {name: value for name, value in self.where if name in key_names}
        if set(key) != set(key_names) or len([n for n, _ in self.where if n in key_names]) != len(key_names):
            raise NotTheSubset("the WHERE clause does not name the whole key once")
        names: dict[str, str] = {}
        values: dict[str, dict[str, Any]] = {}

        def name_of(attribute: str) -> str:
            placeholder = f"#n{len(names)}"
            names[placeholder] = attribute
            return placeholder

        def value_of(value: dict[str, Any]) -> str:
            placeholder = f":v{len(values)}"
            values[placeholder] = value
            return placeholder

        # An UPDATE never creates an item: the key must exist, then every other equality must hold.
        conditions = [f"attribute_exists({name_of(hash_key)})"]
        conditions += [f"{name_of(n)} = {value_of(v)}" for n, v in self.where if n not in key_names]
        clauses = []
        if self.assignments:
            clauses.append("SET " + ", ".join(f"{name_of(n)} = {value_of(v)}" for n, v in self.assignments))
        if self.removals:
            clauses.append("REMOVE " + ", ".join(name_of(n) for n in self.removals))
        return {
            "table_name": self.table,
            "key": key,
            "update_expression": " ".join(clauses),
            "expression_attribute_names": names,
            "expression_attribute_values": values,
            "condition_expression": " AND ".join(conditions),
        }


def parse_partiql_update(statement: str, parameters: list[dict[str, Any]]) -> PartiqlUpdate:
    """The statement as a :class:`PartiqlUpdate`.

    Raises:
        NotTheSubset: it is not an UPDATE of the subset (see the module docstring, point 7).
    """
    tokens: list[tuple[str, str]] = []
    position = 0
    text = statement.rstrip().rstrip(";")
    while position < len(text):
        match = PARTIQL_TOKEN.match(text, position)
        if match is None or match.end() == position:
            raise NotTheSubset(f"unreadable at {position}")
        kind = match.lastgroup or ""
        tokens.append((kind, match.group(kind)))
        position = match.end()
    supplied = iter(parameters)

    def word(index: int) -> str:
        return tokens[index][1].upper() if index < len(tokens) and tokens[index][0] == "word" else ""

    def attribute(index: int) -> str:
        kind, raw = tokens[index] if index < len(tokens) else ("", "")
        if kind == "name":
            return raw[1:-1].replace('""', '"')
        if kind == "word" and raw.upper() not in {"SET", "REMOVE", "WHERE", "AND", "RETURNING"}:
            return raw
        raise NotTheSubset(f"expected a top-level attribute name at token {index}")

    def value(index: int) -> dict[str, Any]:
        kind, raw = tokens[index] if index < len(tokens) else ("", "")
        if kind == "parameter":
            try:
                return dict(next(supplied))
            except StopIteration:
                raise NotTheSubset("fewer parameters than placeholders") from None
        if kind == "string":
            return {"S": raw[1:-1].replace("''", "'")}
        if kind == "number":
            return {"N": raw}
        raise NotTheSubset(f"expected a value at token {index}")

    if word(0) != "UPDATE":
        raise NotTheSubset("not an UPDATE")
    table = attribute(1)
    index = 2
    assignments: list[tuple[str, dict[str, Any]]] = []
    removals: list[str] = []
    while word(index) in ("SET", "REMOVE"):
        clause, index = word(index), index + 1
        while True:
            if clause == "SET":
                if index + 1 >= len(tokens) or tokens[index + 1] != ("operator", "="):
                    raise NotTheSubset("SET takes name = value")
                assignments.append((attribute(index), value(index + 2)))
                index += 3
            else:
                removals.append(attribute(index))
                index += 1
            if index < len(tokens) and tokens[index] == ("operator", ","):
                index += 1
                continue
            break
    if word(index) != "WHERE" or not (assignments or removals):
        raise NotTheSubset("expected SET or REMOVE clauses, then WHERE")
    index += 1
    where: list[tuple[str, dict[str, Any]]] = []
    while True:
        if index + 1 >= len(tokens) or tokens[index + 1] != ("operator", "="):
            raise NotTheSubset("WHERE takes name = value AND ...")
        where.append((attribute(index), value(index + 2)))
        index += 3
        if word(index) == "AND":
            index += 1
            continue
        break
    if index != len(tokens) or next(supplied, None) is not None:
        raise NotTheSubset("trailing tokens or parameters (RETURNING, OR, a function, ...)")
    return PartiqlUpdate(table=table, where=where, assignments=assignments, removals=removals)
