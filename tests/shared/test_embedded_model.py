"""The embedded models: tiny from the committed trained weights, small random.

Checks that writing a model directory is deterministic, that ``tiny`` is the
trained model (its tokenizer knows English, its weights are the committed ones,
its checkpoint is fp32 as the parity tests need) and that the held-out passage
is really held out of training.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file
from tokenizers import Tokenizer

from vllm_platform_template_tools.embedded_model import PRESETS, text_data, trained, write_model
from vllm_platform_template_tools.embedded_model.writer import is_complete


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture(scope="module")
def tiny_dirs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("tiny")
    return write_model("tiny", root / "a"), write_model("tiny", root / "b")


def test_tiny_is_written_deterministically(tiny_dirs: tuple[Path, Path]) -> None:
    a, b = tiny_dirs
    for name in ("model.safetensors", "tokenizer.json", "config.json"):
        assert _sha(a / name) == _sha(b / name), name
    assert is_complete(a, "tiny")


def test_tiny_uses_the_trained_weights_in_fp32(tiny_dirs: tuple[Path, Path]) -> None:
    state = load_file(str(tiny_dirs[0] / "model.safetensors"))
    committed = load_file(str(trained.weights_path()))
    assert state.keys() == committed.keys()
    for name, tensor in state.items():
        assert tensor.dtype == torch.float32, name
        assert torch.equal(tensor, committed[name].float()), name
    config = json.loads((tiny_dirs[0] / "config.json").read_text())
    assert config["dtype"] == "float32"
    assert config["num_key_value_heads"] < config["num_attention_heads"]  # GQA


def test_tiny_tokenizer_is_trained_on_english(tiny_dirs: tuple[Path, Path]) -> None:
    tokenizer = Tokenizer.from_file(str(tiny_dirs[0] / "tokenizer.json"))
    sentence = "It is a truth universally acknowledged, that a single man"
    ids = tokenizer.encode(sentence, add_special_tokens=False).ids
    # Common English words are single tokens: well under half a token per character
    # (the pseudo-word tokenizer of ``small`` spells English out nearly byte by byte).
    assert len(ids) <= 0.35 * len(sentence), ids
    assert tokenizer.token_to_id("Ġtruth") in ids
    assert tokenizer.decode(ids) == sentence


def test_training_record_matches_the_shipped_text() -> None:
    record = json.loads(trained.training_record_path().read_text())
    assert record["text_sha256"] == _sha(text_data.TEXT_PATH)
    assert record["held_out_first_chapter"] == text_data.HELD_OUT_FIRST_CHAPTER
    assert isinstance(record["settings"]["seed"], int)
    # Far better than guessing uniformly over the vocabulary (perplexity 2048).
    assert record["val_perplexity_stored"] < PRESETS["tiny"].vocab_size / 10


def test_held_out_passage_is_not_in_training_text() -> None:
    training = "\n".join(text_data.training_paragraphs())
    passage = text_data.held_out_passage()
    assert len(passage) > 500
    for paragraph in passage.split(text_data.PARAGRAPH_SEPARATOR)[1:]:
        assert paragraph not in training
    assert len(text_data.chapters()) == 62  # title page + 61 chapters


def test_concurrent_ensure_model_writes_once_and_all_see_it(tmp_path) -> None:
    """Parallel test workers ask for the model at once (the GPU tier's xdist engines)."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    from vllm_platform_template_tools.embedded_model.writer import ensure_model, is_complete

    target = tmp_path / "tiny"
    # spawn, as vLLM's and xdist's workers are: a forked child of a process whose
    # OpenMP pool already ran (earlier tests used torch) can hang in its first torch op.
    with ProcessPoolExecutor(3, mp_context=multiprocessing.get_context("spawn")) as pool:
        paths = list(pool.map(ensure_model, ["tiny"] * 3, [target] * 3))
    assert paths == [target] * 3
    assert is_complete(target, "tiny")
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".tiny.") and p.is_dir()]


def test_default_model_dir_is_named_after_the_model(tmp_path, monkeypatch) -> None:
    """Two checkouts with different weights must not rewrite each other's cached model
    (an engine of one would load the other's half-replaced files)."""
    from vllm_platform_template_tools.embedded_model import trained, writer

    monkeypatch.setenv("VLLM_TEMPLATE_CACHE", str(tmp_path))
    first = writer.ensure_model("tiny")
    assert first.parent == tmp_path / "models" and first.name.startswith("tiny-")
    monkeypatch.setattr(trained, "digest", lambda name: "other-weights")
    assert writer._stamp(writer.PRESETS["tiny"])["digest"] not in first.name
    assert writer.is_complete(first, "tiny") is False  # the stamp names the other weights


def test_a_change_to_the_writer_rewrites_the_cached_model(tmp_path, monkeypatch) -> None:
    """The trained weights alone do not name a model directory: tokenizer_config.json
    (its chat template) and config.json come from the writer's code. A cache written
    before the chat template existed kept serving models without one (the chat
    requests of a generated plugin's CI failed: 'default chat template is no longer
    allowed')."""
    from vllm_platform_template_tools.embedded_model import writer

    monkeypatch.setenv("VLLM_TEMPLATE_CACHE", str(tmp_path))
    first = writer.ensure_model("tiny")
    assert "writer" in writer._stamp(writer.PRESETS["tiny"])["source"]
    monkeypatch.setattr(writer, "WRITER_SOURCES", ("writer.py",))  # as if tokenizer.py changed
    assert writer._stamp(writer.PRESETS["tiny"])["digest"] not in first.name
    assert writer.is_complete(first, "tiny") is False


def test_quantized_tiny_is_tiny_in_int8_per_channel(tmp_path) -> None:
    """The W8A8 checkpoint: every decoder linear weight int8 in [-127, 127] with one fp32
    scale per output channel, within half a step of tiny's fp32 weight; the rest equal."""
    from vllm_platform_template_tools.embedded_model import compressed_tensors

    dense_dir = write_model("tiny", tmp_path / "dense")
    quant_dir = write_model("tiny", tmp_path / "w8a8", quantized=True)
    dense = load_file(str(dense_dir / "model.safetensors"))
    quant = load_file(str(quant_dir / "model.safetensors"))
    config = json.loads((quant_dir / "config.json").read_text())
    assert config["quantization_config"] == compressed_tensors.quantization_config()
    quantized = [n for n in dense if compressed_tensors.is_quantized(n)]
    assert len(quantized) == 7 * 2  # seven linear layers in each of the two decoder layers
    for name, weight in dense.items():
        if name not in quantized:
            assert torch.equal(quant[name], weight), name
            continue
        q, scale = quant[name], quant[name.removesuffix("weight") + "weight_scale"]
        assert q.dtype == torch.int8 and int(q.abs().max()) == 127
        assert scale.shape == (weight.shape[0], 1) and scale.dtype == torch.float32
        assert ((q.float() * scale - weight).abs() <= scale / 2 + 1e-7).all(), name
    back = compressed_tensors.dequantized(quant, torch.float32)
    assert back.keys() == dense.keys()


def test_quantized_tiny_moe_has_int8_experts_and_an_fp32_router(tmp_path) -> None:
    """The W8A8 tiny-moe: every expert projection and attention projection int8 per
    channel; the router (llm-compressor ignores it) and everything else as trained."""
    from vllm_platform_template_tools.embedded_model import compressed_tensors

    dense = load_file(str(write_model("tiny-moe", tmp_path / "dense") / "model.safetensors"))
    quant_dir = write_model("tiny-moe", tmp_path / "w8a8", quantized=True)
    quant = load_file(str(quant_dir / "model.safetensors"))
    config = json.loads((quant_dir / "config.json").read_text())
    assert config["quantization_config"] == compressed_tensors.quantization_config(is_moe=True)
    assert compressed_tensors.ROUTER_IGNORE in config["quantization_config"]["ignore"]
    quantized = sorted(n for n in dense if compressed_tensors.is_quantized(n))
    # per layer: q, k, v, o and 3 projections of each of the 4 experts
    assert len(quantized) == 2 * (4 + 3 * 4)
    assert "model.layers.1.block_sparse_moe.experts.3.w3.weight" in quantized
    for name in ("model.layers.0.block_sparse_moe.gate.weight", "lm_head.weight"):
        assert torch.equal(quant[name], dense[name])
    for name in quantized:
        assert quant[name].dtype == torch.int8, name


def test_quantized_refuses_the_bf16_preset(tmp_path) -> None:
    with pytest.raises(ValueError, match="use --size tiny or --size tiny-moe"):
        write_model("small", tmp_path / "small", quantized=True)


def test_tiny_moe_is_the_trained_mixtral(tmp_path) -> None:
    """tiny-moe loads in transformers as Mixtral with the preset's experts, from the
    committed checkpoint names (every weight used, none missing)."""
    from transformers import AutoModelForCausalLM

    preset = PRESETS["tiny-moe"]
    model_dir = write_model("tiny-moe", tmp_path / "moe")
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
    assert type(model).__name__ == "MixtralForCausalLM"
    assert model.config.num_local_experts == 4 and model.config.num_experts_per_tok == 2
    assert sum(p.numel() for p in model.parameters()) == preset.num_parameters()
    stored = load_file(str(model_dir / "model.safetensors"))
    assert "model.layers.0.block_sparse_moe.experts.3.w2.weight" in stored
    record = json.loads(trained.training_record_path(name="tiny-moe").read_text())
    assert record["preset"] == "tiny-moe" and record["parameters"] == preset.num_parameters()


def test_tiny_draft_is_tinys_first_layer(tmp_path) -> None:
    """The draft model: tiny's embeddings, first layer, final norm and LM head, byte for
    byte, with tiny's tokenizer; transformers loads it as a one-layer Llama, every weight
    used."""
    from transformers import AutoModelForCausalLM

    tiny = load_file(str(write_model("tiny", tmp_path / "tiny") / "model.safetensors"))
    draft_dir = write_model("tiny-draft", tmp_path / "draft")
    draft = load_file(str(draft_dir / "model.safetensors"))
    assert draft.keys() == {k for k in tiny if not k.startswith("model.layers.1.")}
    assert all(torch.equal(draft[k], tiny[k]) for k in draft)
    assert (draft_dir / "tokenizer.json").read_bytes() == (
        tmp_path / "tiny" / "tokenizer.json"
    ).read_bytes()
    model = AutoModelForCausalLM.from_pretrained(draft_dir, dtype=torch.float32)
    assert model.config.num_hidden_layers == 1
    assert sum(p.numel() for p in model.parameters()) == PRESETS["tiny-draft"].num_parameters()


def test_tiny_blip2_is_seeded_and_loads_in_transformers(tmp_path) -> None:
    """The vision-language model: the same bytes from every write (one seed, drawn in name
    order), every weight of transformers' BLIP-2 present and used, tiny's tokenizer with
    an ``<image>`` token, and a processor that puts one per Q-Former query before the
    prompt."""
    from PIL import Image
    from transformers import Blip2ForConditionalGeneration, Blip2Processor

    from vllm_platform_template_tools.embedded_model import vision_language as vl

    first = vl.write_vision_language_model(tmp_path / "a")
    second = vl.write_vision_language_model(tmp_path / "b")
    for name in ("model.safetensors", "config.json", "tokenizer.json"):
        assert (first / name).read_bytes() == (second / name).read_bytes(), name
    state = load_file(str(first / "model.safetensors"))
    model = Blip2ForConditionalGeneration.from_pretrained(first, dtype=torch.float32)
    assert state.keys() == model.state_dict().keys()
    assert all(torch.equal(state[k], v) for k, v in model.state_dict().items())
    processor = Blip2Processor.from_pretrained(first)
    image_id = processor.tokenizer.convert_tokens_to_ids(vl.IMAGE_TOKEN)
    assert image_id == model.config.image_token_index == len(processor.tokenizer) - 1
    ids = processor(images=Image.new("RGB", (30, 20)), text="Elizabeth", return_tensors="pt")
    prompt = ids["input_ids"][0].tolist()
    assert prompt[: vl.NUM_QUERY_TOKENS] == [image_id] * vl.NUM_QUERY_TOKENS
    assert image_id not in prompt[vl.NUM_QUERY_TOKENS :]
    assert list(ids["pixel_values"].shape[2:]) == [vl.IMAGE_SIZE, vl.IMAGE_SIZE]


def test_the_cli_offers_every_preset() -> None:
    """``tiny-model`` and ``demo`` list the sizes without importing the presets (their
    --help needs only the standard library): the lists must not drift."""
    import argparse

    from vllm_platform_template_tools.cli import demo, tiny_model

    for module in (demo, tiny_model):
        parser = argparse.ArgumentParser()
        module.add_arguments(parser)
        size = next(a for a in parser._actions if a.dest == "size")
        assert sorted(size.choices) == sorted(PRESETS), module.__name__
