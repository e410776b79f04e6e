"""Model loading failures are one line that says what to do."""

from __future__ import annotations

import pytest

from cad.selector import ModelLoadError, load_model


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
