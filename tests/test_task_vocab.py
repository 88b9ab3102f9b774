"""Vocabulary layout and the tokenizer's round trips and errors."""

from __future__ import annotations

import pytest
import torch
from test_task_helpers import ref_parse_text, ref_parse_tokens

from empirical.task.config import task_config
from empirical.task.pairs import held_out_pairs, training_generator
from empirical.task.registry import family_of
from empirical.task.sampler import sample_training_batch
from empirical.task.vocab import TokenizeError, Vocabulary

EXAMPLE_TEXT = "c=1,b=17,a=42,b+19=?"
EXAMPLE_TOKENS = "c 1 pad b 17 pad pad a 42 pad pad pad + b 19 ="


def test_fixed_id_layout():
    v = Vocabulary(97, 5)
    assert [v.var_id(x) for x in "abcde"] == [97, 98, 99, 100, 101]
    assert (v.plus, v.eq, v.pad, v.d_vocab, v.n_classes) == (102, 103, 104, 105, 97)
    assert v.names[:3] == ["0", "1", "2"] and v.names[96] == "96"
    assert v.names[97:] == ["a", "b", "c", "d", "e", "+", "=", "pad"]
    v = Vocabulary(11, 3, L=10)
    assert (v.var_id("c"), v.plus, v.eq, v.pad, v.d_vocab) == (13, 14, 15, 16, 17)
    with pytest.raises(KeyError, match="not a variable"):
        v.var_id("d")


def test_example_both_forms():
    v = Vocabulary(97, 5)
    ids = v.encode(EXAMPLE_TOKENS)
    assert ids.dtype == torch.long and ids.shape == (16,)
    assert v.decode_tokens(ids) == EXAMPLE_TOKENS
    assert v.decode(ids) == EXAMPLE_TEXT
    assert v.label(ids) == 36
    # the text form drops pads: encode packs the assignments from position 0
    packed = v.encode(EXAMPLE_TEXT)
    assert v.decode_tokens(packed) == "c 1 b 17 a 42 pad pad pad pad pad pad + b 19 ="
    assert v.decode(packed) == EXAMPLE_TEXT
    assert v.encode(" c = 1 , b=17,a=42, b + 19 = ? ").equal(packed)
    assert v.decode(v.encode("3+4=?")) == "3+4=?"


def test_round_trip_of_sampled_sequences():
    cfg = task_config()
    v = family_of(cfg).vocabulary(cfg)
    batch = sample_training_batch(cfg, 400, training_generator(5), held_out=held_out_pairs(cfg, 5))
    texts = v.decode(batch.tokens)
    token_forms = v.decode_tokens(batch.tokens)
    for i in range(len(batch)):
        assert v.encode(token_forms[i]).equal(batch.tokens[i])
        assert v.decode(v.encode(texts[i])) == texts[i]
        assert v.decode(batch.tokens[i]) == texts[i]
        # the text and token forms agree with each other (independent parsers)
        ref = ref_parse_text(texts[i], cfg.p)
        tok = ref_parse_tokens(token_forms[i], cfg.L)
        assert [(x, n) for _, x, n in tok["blocks"]] == ref["assign"]
        assert tok["ops"] == ref["ops"]
        assert v.label(batch.tokens[i]) == ref["label"]


@pytest.mark.parametrize(
    "text, message",
    [
        ("c=1,b+19=?", "'b' is never assigned"),
        ("c=1,f+2=?", "'f' is not a variable"),
        ("f=1,1+2=?", "assignment 1 'f=1' (character 0): 'f' is not a variable"),
        ("c=1,z=3,c+2=?", "assignment 2 'z=3' (character 4)"),
        ("c=100,c+1=?", "number 100 is out of range 0..96"),
        ("c=1,c+1=", "ends with '=?'"),
        ("c1,c+1=?", "assignment 1 'c1' (character 0): expected VARIABLE=NUMBER"),
        ("c=1,c=2,c+1=?", "'c' is assigned twice"),
        ("c=1,c-1=?", "expected OPERAND+OPERAND=?"),
        ("c=1,c+x=?", "second operand: 'x' is not a variable"),
        ("c=1,c+-1=?", "second operand: expected a number"),
        ("", "empty sequence"),
        ("c 1 pad + b 19 =", "token form has 7 tokens, expected L = 16"),
        ("c pad pad b 17 pad pad a 42 pad pad pad + b 19 =", "position 0: variable 'c' is not"),
        ("c 1 pad b 17 pad pad a 42 pad pad 3 + b 19 =", "position 11: '3' where"),
        ("c 1 pad b 17 pad pad a 42 pad pad pad = b 19 +", "position 12: expected '+'"),
        ("c 1 pad b 17 pad pad a 42 pad pad pad + b pad =", "position 14: operand must be"),
        ("c 1 pad b 17 pad pad a 42 pad pad pad + b 19 x", "token 15 'x'"),
        ("c 1 pad b 17 pad pad a 42 pad pad pad + b 197 =", "token 14 '197': number 197"),
    ],
)
def test_malformed_text_names_the_problem(text, message):
    v = Vocabulary(97, 5)
    with pytest.raises(TokenizeError) as info:
        v.encode(text)
    assert message in str(info.value)


def test_layout_overflow_and_unchecked_encoding():
    v = Vocabulary(97, 7)
    with pytest.raises(TokenizeError, match="7 assignments need 14 positions"):
        v.encode("a=1,b=2,c=3,d=4,e=5,f=6,g=7,a+b=?")
    # check=False encodes structurally valid but meaningless sequences (for probes)
    ids = v.encode("c=1,b+19=?", check=False)
    assert v.decode(ids) == "c=1,b+19=?"
    with pytest.raises(TokenizeError, match="never assigned"):
        v.label(ids)


def test_decode_rejects_bad_ids():
    v = Vocabulary(97, 5)
    good = v.encode(EXAMPLE_TOKENS)
    bad = good.clone()
    bad[3] = 105
    with pytest.raises(TokenizeError, match="outside the vocabulary"):
        v.decode(bad)
    with pytest.raises(TokenizeError, match="expected L = 16"):
        v.decode(good[:15])
    bad = good.clone()
    bad[15] = v.pad
    with pytest.raises(TokenizeError, match="position 15: expected '='"):
        v.decode(bad)
