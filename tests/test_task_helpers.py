"""Reference parsers for the task tests, written independently of empirical.task.

`ref_parse_text` reads the paper's text form (`c=1,b=17,a=42,b+19=?`) with plain string
operations; `ref_parse_tokens` reads the token form. Other test modules import them.
"""

from __future__ import annotations

import string

LETTERS = string.ascii_lowercase


def ref_parse_text(text: str, p: int) -> dict:
    """-> {assign: [(letter, value)], ops: (op1, op2), values: (x, y), label}."""
    *assign_parts, expr = text.split(",")
    assign = []
    for part in assign_parts:
        letter, value = part.split("=")
        assert len(letter) == 1 and letter in LETTERS, part
        assign.append((letter, int(value)))
    assert expr.endswith("=?"), expr
    op1, op2 = expr[:-2].split("+")
    table = dict(assign)
    assert len(table) == len(assign), f"variable assigned twice in {text}"

    def resolve(op: str) -> int:
        return table[op] if op.isalpha() else int(op)

    x, y = resolve(op1), resolve(op2)
    return {"assign": assign, "ops": (op1, op2), "values": (x, y), "label": (x + y) % p}


def ref_parse_tokens(text: str, L: int) -> dict:
    """-> {tokens, blocks: [(position, letter, value)], ops}; checks the layout."""
    toks = text.split()
    assert len(toks) == L, text
    assert toks[L - 4] == "+" and toks[L - 1] == "=", text
    blocks, i = [], 0
    while i < L - 4:
        if toks[i] == "pad":
            i += 1
            continue
        assert len(toks[i]) == 1 and toks[i] in LETTERS, text
        assert i + 1 < L - 4 and toks[i + 1].isdigit(), text
        blocks.append((i, toks[i], int(toks[i + 1])))
        i += 2
    return {"tokens": toks, "blocks": blocks, "ops": (toks[L - 3], toks[L - 2])}


def test_reference_parser_on_the_papers_example():
    got = ref_parse_text("c=1,b=17,a=42,b+19=?", 97)
    assert got["label"] == 36 and got["values"] == (17, 19)
    assert got["assign"] == [("c", 1), ("b", 17), ("a", 42)]
    tok = ref_parse_tokens("c 1 pad b 17 pad pad a 42 pad pad pad + b 19 =", 16)
    assert tok["blocks"] == [(0, "c", 1), (3, "b", 17), (7, "a", 42)]
    assert tok["ops"] == ("b", "19")
