"""The zoo as a whole: at least eighteen encodings, each new one with a label and a colour, every
one in the command line's choices, through the desiderata scorecard (digit encodings: D1, D2, D4
measured, the rest honestly n/a) and through the paper's task numbers without a range error."""

import pytest

from workbench import encoders
from workbench.config import parser as _parser
from workbench.figures import plots
from workbench.measures import desiderata, scorecard
from workbench.training.train import TrainConfig

ZOO = ["reversed_digits", "triple_digit_r2l", "scientific", "place_value", "abacus", "ntl", "log_xval"]
ZOO += ["ntl_number", "value_prefix", "decoding_regression", "position_coupling", "digit_aggregate"]  # issue 64


def test_at_least_eighteen_encodings_each_with_a_label_and_a_colour():
    names = encoders.names()
    assert len(names) >= 18 and set(ZOO) <= set(names)
    assert all(isinstance(encoders.get(n).label, str) and encoders.get(n).label for n in ZOO)
    assert len({plots.encoding_color(n) for n in names}) == len(names)
    parser = _parser(TrainConfig.of())
    for name in ZOO:
        assert parser.parse_args(["--encoding", name]).encoding == name
    assert all(name in parser.epilog for name in ZOO)  # each one's options in --help


@pytest.fixture(scope="module")
def card():
    m = {
        "D1_corpus": desiderata.d1_corpus(ZOO),
        "D2": desiderata.d2_uniqueness(ZOO, n=300),
        "D4": desiderata.d4_decades(ZOO, n_per_decade=10),
        "D4_specials": desiderata.d4_specials(ZOO),
    }
    single = [n for n in ZOO if encoders.get(n).single_token]
    m |= {
        "D3": desiderata.d3_structure(single, n_pairs=200),
        "D5": desiderata.d5_normalization(single, n=100),
        "D6": desiderata.d6_precision(single, n=300),
        "D7": desiderata.d7_continuity(desiderata.d7_curves(single)),
        "D8": desiderata.d8_noise(single, n=100),
        "D9": desiderata.d9_operator(single, steps=3),
    }
    return scorecard.scorecard(m)


def test_the_scorecard_takes_every_zoo_encoding(card):
    for name in ZOO:
        rows = card[card.encoding == name].set_index("desideratum")
        assert list(rows.index) == list(desiderata.DESIDERATA)
        assert (rows["paper"] == "—").all()  # the paper never judged them
        if encoders.get(name).single_token:
            assert (rows["verdict"] != "n/a").all()
            assert rows.loc["D7", "verdict"] == "pass"  # an ideal head's loss grows with the error
        else:
            assert rows.loc["D1", "value"] > 1 and rows.loc["D1", "verdict"] != "pass"  # several tokens per number
            assert rows.loc[["D3", "D5", "D6", "D7", "D8", "D9"], "verdict"].eq("n/a").all()
            assert rows.loc["D2", "verdict"] == "pass" and rows.loc["D4", "value"] == 1.0  # exact in the range


def test_the_papers_task_numbers_fit_every_zoo_encoding():
    tokens = desiderata.d1_tasks(ZOO, n=20)  # the paper's operand range: raises if a number does not fit
    assert set(tokens.encoding) == set(ZOO) and (tokens.output_tokens > 0).all()


def test_the_tokens_a_model_receives_are_shown(capsys):
    from workbench.tokenizer import Tokenizer, main

    assert Tokenizer("scientific").tokens_of("<|bos|>-12.5 * 300<|eoq|>") == [
        "<|bos|>",
        "-",
        "1",
        "2",
        "5",
        "<e+1>",
        "' *'",
        "' '",
        "3",
        "<e+2>",
        "<|eoq|>",
    ]
    assert Tokenizer("bittokens").tokens_of("x=-0.5")[-1] == "<|num|>=-0.5"
    main(["abacus", "307 + 1", "--encoding-option", "max_offset=3"])
    assert capsys.readouterr().out.strip() == "7 0 3 ' +' ' ' 1"  # reversed digits, text tokens quoted
