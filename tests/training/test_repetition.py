"""The repetition guard's loop detector and per-domain reply bounds, without a model."""

from __future__ import annotations

from schemas.render import CLOSE_TAG
from training.backends.base import GenerationConfig, ending_at_answer
from training.backends.repetition import LoopDetector

DETECTOR = LoopDetector(min_span=128, repeats=3, max_period=64)


def test_a_tail_that_repeats_one_block_over_the_span_is_a_loop() -> None:
    prefix = list(range(1000, 1100))
    assert DETECTOR.looping([*prefix, *[7, 8] * 64])
    assert DETECTOR.looping([*prefix, *list(range(40)) * 4])  # a 40-token line, 4 times (160 tokens)
    assert DETECTOR.looping([*prefix, *[5] * 128])


def test_short_repeats_and_varied_text_are_not_loops() -> None:
    assert not DETECTOR.looping([7, 8] * 63)  # 126 tokens: below the span
    assert not DETECTOR.looping(list(range(40)) * 2)  # a block twice: a list of two equal lines
    assert not DETECTOR.looping([*list(range(40)) * 4, 99])  # the loop was left again
    assert not DETECTOR.looping(list(range(2000)))
    assert not DETECTOR.looping([])
    # Lines that differ in one token each (an id, a counter) are no loop however many there are.
    assert not DETECTOR.looping([t for n in range(30) for t in (1, 2, 3, 100 + n, 4)])


def test_a_block_longer_than_max_period_is_not_looked_for() -> None:
    assert not DETECTOR.looping(list(range(65)) * 3)
    assert LoopDetector(max_period=65).looping(list(range(65)) * 3)


def test_a_domain_takes_its_own_bound_and_others_the_global_one() -> None:
    config = GenerationConfig(max_new_tokens=128, max_new_tokens_by_domain=(("android", 2000), ("os", 900)))
    android = config.for_domain("android")
    assert android.max_new_tokens == 2000 and android.max_new_tokens_by_domain == ()
    assert config.for_domain("web") == GenerationConfig(max_new_tokens=128)
    # Equal per-domain configs batch and cache together whatever the rest of the table says.
    other = GenerationConfig(max_new_tokens=128, max_new_tokens_by_domain=(("android", 2000),))
    assert other.for_domain("android") == android


def test_bounds_of_one_target_form_leave_the_other_form_the_global_bound() -> None:
    table = (("android", 40),)
    delta = GenerationConfig(max_new_tokens=128, max_new_tokens_by_domain=table, bounds_form="delta")
    assert delta.for_domain("android", "delta") == GenerationConfig(max_new_tokens=40)
    assert delta.for_domain("android", "full") == GenerationConfig(max_new_tokens=128)


def test_ending_at_the_answer_adds_the_closing_tag_once() -> None:
    ended = ending_at_answer(GenerationConfig(stop=("</x>",)))
    assert ended.stop == ("</x>", CLOSE_TAG) and ended.include_stop
    assert ending_at_answer(ended) == ended
