"""The plugin's additional_config options."""

from __future__ import annotations

import pytest

from vllm_platform_template.settings import MODEL_IMPLS, TemplateOptions, parse_options


def test_defaults() -> None:
    assert parse_options({}) == TemplateOptions()
    assert parse_options(None) == TemplateOptions()
    assert parse_options({"other_plugin": {"x": 1}}) == TemplateOptions()


def test_values() -> None:
    options = parse_options({"template": {"compile_stage": "fusion_only", "model_impl": "vllm"}})
    assert options.compile_stage == "fusion_only"
    assert options.model_impl == "vllm"
    for impl in MODEL_IMPLS:  # vLLM's classes, and the plugin's own model code where it has it
        assert parse_options({"template": {"model_impl": impl}}).model_impl == impl


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ({"template": {"compile_stage": "jit"}}, "compile_stage must be one of"),
        ({"template": {"model_impl": "hf"}}, "model_impl must be one of"),
        ({"template": {"stage": "graph"}}, "unknown template option"),
        ({"template": "graph"}, "must be a JSON object"),
        ({"template": {"graph_debug": "yes"}}, "graph_debug must be true or false"),
    ],
)
def test_bad_values_say_what_to_fix(raw: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse_options(raw)


def test_options_of_a_config_are_parsed_once_and_shared() -> None:
    """Every hook reads one parsed object per distinct option set (``settings.options_of``)."""
    from types import SimpleNamespace

    from vllm_platform_template.settings import options_of

    first = SimpleNamespace(additional_config={"template": {"attention": "reference"}})
    again = SimpleNamespace(additional_config={"template": {"attention": "reference"}})
    assert options_of(first) is options_of(again)
    assert options_of(first).attention == "reference"
    assert options_of(None) == TemplateOptions() == options_of(SimpleNamespace())
    with pytest.raises(ValueError, match="attention must be one of"):
        options_of(SimpleNamespace(additional_config={"template": {"attention": "flash"}}))
