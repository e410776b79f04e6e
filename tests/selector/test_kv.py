"""KV equivalence: one parallel forward of N tokens equals N single-token forwards."""

from __future__ import annotations

import pytest
import torch

from cad.selector import kv


@pytest.mark.parametrize("model_name", ["tiny_qwen", "tiny_llama"])
@pytest.mark.parametrize("span", [1, 7, 64])
def test_one_forward_copy_equals_token_by_token(request, model_name: str, span: int) -> None:
    loaded = request.getfixturevalue(model_name)
    generator = torch.Generator().manual_seed(span)
    prefix = torch.randint(0, 5000, (33,), generator=generator).tolist()
    copied = torch.randint(0, 5000, (span,), generator=generator).tolist()

    parallel = kv.new_cache(loaded.model)
    kv.prefill(loaded.model, parallel, prefix, loaded.device)
    parallel_logits = kv.append(loaded.model, parallel, copied, loaded.device)

    serial = kv.new_cache(loaded.model)
    kv.prefill(loaded.model, serial, prefix, loaded.device)
    for token in copied:
        serial_logits = kv.decode_one(loaded.model, serial, token, loaded.device)

    assert kv.cache_length(parallel) == kv.cache_length(serial) == len(prefix) + span
    for a, b in zip(parallel.layers, serial.layers, strict=True):
        torch.testing.assert_close(a.keys, b.keys, atol=1e-5, rtol=1e-4)
        torch.testing.assert_close(a.values, b.values, atol=1e-5, rtol=1e-4)
    torch.testing.assert_close(parallel_logits, serial_logits, atol=1e-4, rtol=1e-4)
    assert int(parallel_logits.argmax()) == int(serial_logits.argmax())


def test_truncate_then_append_matches_fresh_cache(tiny_qwen) -> None:
    tokens = list(range(100, 140))
    cache = kv.new_cache(tiny_qwen.model)
    kv.prefill(tiny_qwen.model, cache, tokens, tiny_qwen.device)
    kv.truncate(cache, 25)
    assert kv.cache_length(cache) == 25
    resumed = kv.append(tiny_qwen.model, cache, tokens[25:30], tiny_qwen.device)
    fresh_cache = kv.new_cache(tiny_qwen.model)
    fresh = kv.prefill(tiny_qwen.model, fresh_cache, tokens[:30], tiny_qwen.device)
    torch.testing.assert_close(resumed, fresh, atol=1e-4, rtol=1e-4)
