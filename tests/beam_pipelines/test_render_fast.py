"""The stand-in renderer gives exactly the chat template's text, and steps aside where it cannot."""

from __future__ import annotations

import pytest

from schemas.chat_tokens import ChatTokenizer, _content_tests, _template_env
from schemas.render import chat_messages, target_text


@pytest.fixture(scope="module")
def tok() -> ChatTokenizer:
    return ChatTokenizer()


def _template(tok: ChatTokenizer, marked: list[dict], generation: bool = False) -> str:
    return tok._slow_render(marked, generation)


def test_fast_rendering_equals_the_template_on_recorded_conversations(tok, recorded):
    assert tok._fast is not None and tok._fast.usable
    for t in recorded:
        for k, step in enumerate(t.steps, start=1):
            messages = chat_messages(t, k)
            full = [*messages, {"role": "assistant", "content": target_text(step.observation)}]
            for conversation, generation in ((full, False), (messages, True)):
                marked = [{**m, "content": tok._mark(m["content"])} for m in conversation]
                assert tok.render(conversation, add_generation_prompt=generation) == _template(
                    tok, marked, generation
                )


@pytest.mark.parametrize(
    "content",
    [
        "<think>\nplanning\n</think>\n\nanswer",  # the template splits reasoning out of this
        "\nleading newline",  # the template strips the final assistant message
        "trailing blank \n",
        "",
        "<tool_response>\nx\n</tool_response>",  # a tool response is not a user query
        "screen shows <|im_end|> as text",  # control-token text in data stays data
    ],
)
def test_contents_the_template_inspects_render_as_the_template_does(tok, content):
    for conversation in (
        [{"role": "user", "content": "ls"}, {"role": "assistant", "content": content}],
        [{"role": "system", "content": "s"}, {"role": "user", "content": content}],
    ):
        marked = [{**m, "content": tok._mark(m["content"])} for m in conversation]
        assert tok.render(conversation) == _template(tok, marked)


def test_templates_that_rewrite_content_are_not_rendered_by_stand_ins():
    env = _template_env()
    rewriting = "{% for m in messages %}{{ m.content | upper }}{% endfor %}"
    splitting = "{% for m in messages %}{{ m.content.split('\\n')[0] }}{% endfor %}"
    plain = "{% for m in messages %}{% if '</think>' in m.content %}x{% endif %}{{ m.content }}{% endfor %}"
    assert _content_tests(env.parse(rewriting))[1] is False
    assert _content_tests(env.parse(splitting))[1] is False
    assert _content_tests(env.parse(plain)) == ({"</think>"}, True)
