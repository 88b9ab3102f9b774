"""`ChainVocabulary`: the chain family's tokenizer, the assign_add one (empirical.task.vocab)
whose assignments may also bind a variable to another variable, `b=a` (token form `b a`);
labels follow the pointers, and a pointer to an unassigned variable or a cycle is an error.
"""

from __future__ import annotations

from empirical.task.vocab import Vocabulary

__all__ = ["ChainVocabulary"]


class ChainVocabulary(Vocabulary):
    """Token ids as `Vocabulary`'s; an assignment binds a number or a variable."""

    assignment_form = "VARIABLE=NUMBER or VARIABLE=VARIABLE"
    assigned = "number or variable"

    def assigned_ids(self) -> int:
        return self.p + self.K  # the numbers and the variables

    def _assigned(self, text: str, where: str) -> int:
        if text in self.letters:
            return self.p + self.letters.index(text)
        return super()._assigned(text, where)
