"""Vocabulary and tokenizer of the assign-and-add task (docs/task.md, "Vocabulary"): ids
0..p-1 the numbers, p..p+K-1 the variables, then `+`, `=`, `pad`. `encode` takes the paper's
form `c=1,b=17,a=42,b+19=?` (packed from position 0) or the token form of exactly L tokens
(which round-trips with `decode_tokens`). The chain family's tokenizer, whose assignments may
bind a variable to another variable (`b=a`), extends it (empirical/task/chain/vocab.py); a
config's tokenizer is its family's: `family_of(cfg).vocabulary(cfg)`.
"""

from __future__ import annotations

import re
import string
from collections.abc import Sequence

import torch

from disentangled.errors import UserError

_ASSIGN_RE = re.compile(r"\s*([A-Za-z]\w*)\s*=\s*(\S*?)\s*")
_EXPR_RE = re.compile(r"\s*(\S+?)\s*\+\s*(\S+?)\s*=\s*\?\s*")


class TokenizeError(UserError, ValueError):
    """Text or token ids that are not a sequence of the task; the message says where."""


def check_ids(seq: Sequence[int], d_vocab: int, error: type[Exception]) -> None:
    """`error` naming the first id of `seq` outside 0..d_vocab - 1."""
    for i, t in enumerate(seq):
        if not 0 <= int(t) < d_vocab:
            raise error(f"position {i}: id {t} is outside the vocabulary 0..{d_vocab - 1}")


def tokens_text(names: Sequence[str], d_vocab: int, ids, error: type[Exception]) -> str | list[str]:
    """Token ids (L,) -> their names, space separated; (n, L) -> a list of them; an id outside
    0..d_vocab - 1 is `error` naming its position (every family's `decode_tokens`)."""
    if isinstance(ids, torch.Tensor) and ids.dim() == 2:
        return [tokens_text(names, d_vocab, row, error) for row in ids.cpu()]
    seq = ids.tolist() if isinstance(ids, torch.Tensor) else list(ids)
    check_ids(seq, d_vocab, error)
    return " ".join(names[int(t)] for t in seq)


class Vocabulary:
    """Token ids of the task for modulus `p`, `K` variables and sequence length `L`."""

    assignment_form = "VARIABLE=NUMBER"  # what an assignment of the text form is
    assigned = "number"  # what follows an assignment's variable

    def __init__(self, p: int, K: int, L: int = 16):
        if not (isinstance(p, int) and p >= 2):
            raise ValueError(f"p = {p!r} must be an integer >= 2")
        if not (isinstance(K, int) and 1 <= K <= 26):
            raise ValueError(f"K = {K!r} must be an integer in [1, 26]")
        if not (isinstance(L, int) and L >= 8):
            raise ValueError(f"L = {L!r} must be an integer >= 8")
        self.p, self.K, self.L = p, K, L
        self.letters = string.ascii_lowercase[:K]
        self.plus = p + K
        self.eq = p + K + 1
        self.pad = p + K + 2
        self.d_vocab = p + K + 3
        self.n_classes = p
        self.region = L - 4  # assignment positions 0..L-5
        self.names = [str(i) for i in range(p)] + list(self.letters) + ["+", "=", "pad"]
        self._ids = {name: i for i, name in enumerate(self.names)}

    def __repr__(self) -> str:
        return f"{type(self).__name__}(p={self.p}, K={self.K}, L={self.L})"

    def assigned_ids(self) -> int:
        """Ids below this may follow an assignment's variable (here the numbers)."""
        return self.p

    # ------------------------------------------------------------------ ids
    def var_id(self, letter: str) -> int:
        if letter not in self.letters:
            raise KeyError(f"{letter!r} is not a variable; K = {self.K}: {', '.join(self.letters)}")
        return self.p + self.letters.index(letter)

    def token_id(self, name: str) -> int:
        try:
            return self._ids[name]
        except KeyError:
            raise KeyError(f"{name!r} is not a token") from None

    def is_number(self, ids: torch.Tensor) -> torch.Tensor:
        return (ids >= 0) & (ids < self.p)

    # ------------------------------------------------------------------ text -> ids
    def _assigned(self, text: str, where: str) -> int:
        """The id of what an assignment binds its variable to (here a number)."""
        return self._number(text, where)

    def _operand(self, text: str, where: str) -> int:
        if text in self.letters:
            return self.p + self.letters.index(text)
        return self._number(text, where, allow_var=True)

    def _number(self, text: str, where: str, allow_var: bool = False) -> int:
        if text.isdigit():
            value = int(text)
            if value < self.p:
                return value
            raise TokenizeError(f"{where}: number {value} is out of range 0..{self.p - 1}")
        if len(text) == 1 and text.isalpha():
            raise TokenizeError(
                f"{where}: {text!r} is not a variable; with K = {self.K} the variables are "
                f"{', '.join(self.letters)}"
            )
        what = f"a number 0..{self.p - 1}" + (f" or a variable {self.letters}" if allow_var else "")
        raise TokenizeError(f"{where}: expected {what}, got {text!r}")

    def encode(self, text: str, check: bool = True) -> torch.Tensor:
        """Text (either form) -> LongTensor (L,); with `check` the sequence must also make
        sense (assigned variables distinct, every variable operand assigned)."""
        if not isinstance(text, str):
            raise TypeError(f"encode expects a str, got {type(text).__name__}")
        stripped = text.strip()
        if not stripped:
            raise TokenizeError("empty sequence")
        if "?" in stripped or "," in stripped or " " not in stripped:
            ids = self._encode_text(stripped)
        else:
            ids = self._encode_token_form(stripped)
        if check:
            self._check_semantics(ids)
        return ids

    def _encode_text(self, text: str) -> torch.Tensor:
        if not text.endswith("?"):
            raise TokenizeError(
                f"{text!r}: the paper's form ends with '=?', e.g. 'c=1,b=17,a=42,b+19=?'"
            )
        parts = text.split(",")
        offsets, pos = [], 0
        for part in parts:
            offsets.append(pos)
            pos += len(part) + 1
        assigns: list[tuple[int, int]] = []
        for i, (part, off) in enumerate(zip(parts[:-1], offsets[:-1], strict=True)):
            where = f"assignment {i + 1} {part.strip()!r} (character {off})"
            m = _ASSIGN_RE.fullmatch(part)
            if m is None:
                raise TokenizeError(f"{where}: expected {self.assignment_form}, e.g. 'c=1'")
            var, num = m.group(1), m.group(2)
            if var not in self.letters:
                raise TokenizeError(
                    f"{where}: {var!r} is not a variable; with K = {self.K} the variables are "
                    f"{', '.join(self.letters)}"
                )
            assigns.append((self.p + self.letters.index(var), self._assigned(num, where)))
        expr, off = parts[-1], offsets[-1]
        where = f"addition {expr.strip()!r} (character {off})"
        m = _EXPR_RE.fullmatch(expr)
        if m is None:
            raise TokenizeError(f"{where}: expected OPERAND+OPERAND=?, e.g. 'b+19=?'")
        a = self._operand(m.group(1), f"{where}, first operand")
        b = self._operand(m.group(2), f"{where}, second operand")
        if 2 * len(assigns) > self.region:
            raise TokenizeError(
                f"{text!r}: {len(assigns)} assignments need {2 * len(assigns)} positions, but "
                f"positions 0..{self.region - 1} hold only {self.region} (L = {self.L})"
            )
        ids = torch.full((self.L,), self.pad, dtype=torch.long)
        for j, (v, n) in enumerate(assigns):
            ids[2 * j], ids[2 * j + 1] = v, n
        ids[self.L - 4 :] = torch.tensor([self.plus, a, b, self.eq])
        return ids

    def _encode_token_form(self, text: str) -> torch.Tensor:
        toks = text.split()
        if len(toks) != self.L:
            raise TokenizeError(
                f"token form has {len(toks)} tokens, expected L = {self.L} "
                "(e.g. 'c 1 pad b 17 pad pad a 42 pad pad pad + b 19 =')"
            )
        ids = []
        for i, tok in enumerate(toks):
            if tok in self._ids:
                ids.append(self._ids[tok])
            else:
                ids.append(self._number(tok, f"token {i} {tok!r}", allow_var=True))
        out = torch.tensor(ids, dtype=torch.long)
        self._parse_ids(out)  # layout check
        return out

    # ------------------------------------------------------------------ ids -> text
    def _parse_ids(self, ids) -> tuple[list[tuple[int, int, int]], int, int]:
        """Check the layout; return ([(var_index, value_id, position)], op1_id, op2_id); a
        value_id is the number itself (the chain family's: or the id p + w of a variable w)."""
        seq = [int(t) for t in (ids.tolist() if isinstance(ids, torch.Tensor) else ids)]
        if len(seq) != self.L:
            raise TokenizeError(f"sequence has {len(seq)} tokens, expected L = {self.L}")
        self._check_range(seq)
        R, p = self.region, self.p
        assigns = []
        i = 0
        while i < R:
            t = seq[i]
            if t == self.pad:
                i += 1
            elif p <= t < p + self.K:
                if i + 1 >= R or not seq[i + 1] < self.assigned_ids():
                    raise TokenizeError(
                        f"position {i}: variable {self.names[t]!r} is not followed by its "
                        f"{self.assigned} inside the assignment positions 0..{R - 1}"
                    )
                assigns.append((t - p, seq[i + 1], i))
                i += 2
            else:
                raise TokenizeError(
                    f"position {i}: {self.names[t]!r} where an assignment variable or pad belongs "
                    f"(positions 0..{R - 1} hold 'VARIABLE NUMBER' pairs and pads)"
                )
        expected = {self.L - 4: "+", self.L - 1: "="}
        for pos, name in expected.items():
            if seq[pos] != self._ids[name]:
                raise TokenizeError(
                    f"position {pos}: expected {name!r}, got {self.names[seq[pos]]!r}"
                )
        for pos in (self.L - 3, self.L - 2):
            if not seq[pos] < p + self.K:
                raise TokenizeError(
                    f"position {pos}: operand must be a number or a variable, got "
                    f"{self.names[seq[pos]]!r}"
                )
        return assigns, seq[self.L - 3], seq[self.L - 2]

    def _check_semantics(self, ids: torch.Tensor) -> None:
        assigns, a, b = self._parse_ids(ids)
        seen = set()
        for v, _, pos in assigns:
            if v in seen:
                raise TokenizeError(
                    f"position {pos}: variable {self.letters[v]!r} is assigned twice"
                )
            seen.add(v)
        for pos, t in ((self.L - 3, a), (self.L - 2, b)):
            if t >= self.p and t - self.p not in seen:
                raise TokenizeError(
                    f"position {pos}: operand {self.names[t]!r} is never assigned, so the sum is "
                    "undefined"
                )
        for v, t, pos in assigns:
            if t >= self.p and t - self.p not in seen:
                raise TokenizeError(
                    f"position {pos}: {self.letters[v]!r} points to {self.names[t]!r}, which is "
                    "never assigned"
                )
        for pos, t in ((self.L - 3, a), (self.L - 2, b)):
            if t >= self.p:
                self._resolve(t, {v: n for v, n, _ in assigns}, pos)

    def _resolve(self, t: int, bindings: dict[int, int], pos: int) -> int:
        """The number a token id stands for: itself, or its variable's binding followed
        through pointers; a TokenizeError for an unassigned variable or a cycle."""
        seen = []
        while t >= self.p:
            v = t - self.p
            if v not in bindings:
                raise TokenizeError(
                    f"position {pos}: {self.names[t]!r} is never assigned, so the sum is undefined"
                )
            if v in seen:
                cycle = "=".join(self.letters[u] for u in seen + [v])
                raise TokenizeError(f"position {pos}: the pointers form a cycle {cycle}")
            seen.append(v)
            t = bindings[v]
        return t

    def decode(self, ids: torch.Tensor | Sequence[int]) -> str | list[str]:
        """Token ids (L,) -> the paper's text form; (n, L) -> a list of them."""
        if isinstance(ids, torch.Tensor) and ids.dim() == 2:
            return [self.decode(row) for row in ids.cpu()]
        assigns, a, b = self._parse_ids(ids)
        parts = [f"{self.letters[v]}={self.names[n]}" for v, n, _ in assigns]
        parts.append(f"{self.names[a]}+{self.names[b]}=?")
        return ",".join(parts)

    def decode_tokens(self, ids: torch.Tensor | Sequence[int]) -> str | list[str]:
        """Token ids (L,) -> the token form (space separated); (n, L) -> a list of them."""
        return tokens_text(self.names, self.d_vocab, ids, TokenizeError)

    def _check_range(self, seq) -> None:
        """A TokenizeError naming the first id outside the vocabulary."""
        check_ids(seq, self.d_vocab, TokenizeError)

    def label_text(self, label: int) -> str:
        """A label as `sample` prints it (the number)."""
        return str(int(label))

    def label(self, ids: torch.Tensor | Sequence[int]) -> int:
        """The answer of one sequence: operands resolved through its assignments, mod p."""
        assigns, a, b = self._parse_ids(ids)
        values = {v: n for v, n, _ in assigns}
        first = self._resolve(a, values, self.L - 3)
        return (first + self._resolve(b, values, self.L - 2)) % self.p
