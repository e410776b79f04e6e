"""Model loading failures are one line that says what to do."""

from __future__ import annotations

import pytest
import torch

from cad.selector import ModelLoadError, load_model
from cad.selector.cpu_packing import PackedHead, bfloat16_kernels
from cad.selector.loading import native_bfloat16_cpu, pick_dtype
from cad.selector.runtime import output_head


def test_missing_folder(tmp_path) -> None:
    with pytest.raises(ModelLoadError, match="does not exist"):
        load_model(str(tmp_path / "nope"))


def test_unreachable_hub_id_is_one_line() -> None:
    with pytest.raises(ModelLoadError) as info:
        load_model("no-such-org/no-such-model-xyz")
    message = str(info.value)
    assert "\n" not in message
    assert "--model PATH" in message


def test_bad_device_and_dtype(tiny_qwen) -> None:
    with pytest.raises(ModelLoadError, match="unknown dtype"):
        load_model(tiny_qwen.name, dtype="float8")
    with pytest.raises(ModelLoadError, match="unknown device"):
        load_model(tiny_qwen.name, device="tpu")


def test_adapter_folder_must_hold_an_adapter(tiny_qwen, tmp_path) -> None:
    with pytest.raises(ModelLoadError, match=r"adapter_config\.json"):
        load_model(tiny_qwen.name, device="cpu", adapter=str(tmp_path))


def test_loaded_model_reports_device_dtype_and_warms_up(tiny_qwen) -> None:
    assert tiny_qwen.device.type == "cpu"
    assert str(tiny_qwen.dtype) == "torch.float32"
    assert tiny_qwen.vocab_size >= len(tiny_qwen.tokenizer)
    tiny_qwen.warm_up()


@pytest.mark.parametrize(("avx512_bf16", "amx"), [(True, False), (False, True), (False, False)])
def test_auto_dtype_on_a_cpu_is_bfloat16_where_it_is_multiplied_in_hardware(
    monkeypatch, avx512_bf16: bool, amx: bool
) -> None:
    monkeypatch.setattr(torch.cpu, "_is_avx512_bf16_supported", lambda: avx512_bf16)
    monkeypatch.setattr(torch.cpu, "_is_amx_tile_supported", lambda: amx)
    native = avx512_bf16 or amx
    assert native_bfloat16_cpu() is native
    cpu = torch.device("cpu")
    assert pick_dtype("auto", cpu) == (torch.bfloat16 if native else torch.float32)
    assert pick_dtype("auto", cpu, training=True) == torch.float32
    assert pick_dtype("float32", cpu) == torch.float32
    assert pick_dtype("bfloat16", cpu, training=True) == torch.bfloat16


def test_a_cpu_model_loads_in_bfloat16_and_decodes_through_the_packed_runtime(
    tiny_qwen, monkeypatch
) -> None:
    monkeypatch.setattr(torch.cpu, "_is_avx512_bf16_supported", lambda: True)
    loaded = load_model(tiny_qwen.name, device="cpu")
    assert loaded.dtype == torch.bfloat16
    assert next(loaded.model.parameters()).dtype == torch.bfloat16
    assert isinstance(output_head(loaded.model), PackedHead) is bfloat16_kernels()


def test_the_load_names_its_phases_in_order(tiny_qwen) -> None:
    heard: list[str] = []
    loaded = load_model(tiny_qwen.name, device="cpu", dtype="float32", on_phase=heard.append)
    assert heard == ["tokenizer", "weights", "device", "runtime"]
    assert loaded.device == torch.device("cpu")
