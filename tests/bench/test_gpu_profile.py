"""The GPU step profile's bookkeeping and the start-up table, on a CPU (what needs a GPU is
run by ``bench/gpu/run.sh``)."""

from __future__ import annotations

import pytest
from transformers import Qwen2Config

from bench.gpu import startup
from bench.gpu.profile import kernel_table, kind_of, markdown, product_shapes


@pytest.mark.parametrize(
    ("name", "kind"),
    [
        ("nvjet_tst_64x8_64x16_4x1_v_bz_splitK_TNT", "matrix products"),
        (
            "void gemv2T_kernel_val<int, int, __nv_bfloat16, float, 128, 16, 4, 4>",
            "matrix products",
        ),
        ("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize64x64x64", "matrix products"),
        ("void (anonymous namespace)::cunn_SoftMaxForward<4, float, float>", "softmax"),
        ("void at::native::rms_norm_kernel<c10::BFloat16>", "norms"),
        (
            "void at::native::index_copy_kernel_impl<at::native::OpaqueType<2> >",
            "cache writes and gathers",
        ),
        ("Memcpy DtoD (Device -> Device)", "copies"),
        (
            "void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float, ArgMaxOps>>",
            "reductions",
        ),
        (
            "void at::native::vectorized_elementwise_kernel<4, at::native::AddFunctor<float>>",
            "elementwise",
        ),
        ("void flash_fwd_kernel<Flash_fwd_kernel_traits>", "other"),
        ("attention_kernel", "fused (Triton)"),
        ("triton_poi_fused_add_mul_0", "elementwise"),
    ],
)
def test_kernels_are_sorted_into_kinds_by_their_names(name: str, kind: str) -> None:
    assert kind_of(name) == kind


def test_the_kernel_table_is_per_step_and_orders_kinds_and_kernels_by_time() -> None:
    events = [
        ("nvjet_gemm", 8, 400.0),
        ("vectorized_elementwise_kernel<add>", 16, 80.0),
        ("cunn_SoftMaxForward", 4, 40.0),
        ("gemv2T_kernel", 4, 200.0),
    ]
    table = kernel_table(events, steps=4)
    assert list(table["kinds"]) == ["matrix products", "elementwise", "softmax"]
    assert table["kinds"]["matrix products"] == {"count": 3.0, "us": 150.0}
    assert table["kernels_per_step"] == 8.0
    assert table["kernel_us_per_step"] == 180.0
    assert [kernel["name"] for kernel in table["slowest"]][:2] == ["nvjet_gemm", "gemv2T_kernel"]
    assert table["slowest"][0]["us"] == 100.0


def test_the_products_of_a_layer_are_its_fused_shapes() -> None:
    config = Qwen2Config(
        hidden_size=1536,
        intermediate_size=8960,
        num_attention_heads=12,
        num_key_value_heads=2,
        vocab_size=151936,
    )
    assert product_shapes(config) == {
        "qkv": (2048, 1536),
        "out": (1536, 1536),
        "gate_up": (17920, 1536),
        "down": (1536, 8960),
        "head": (151936, 1536),
    }


def test_the_profile_table_shows_every_kind_product_and_floor() -> None:
    eager = kernel_table([("nvjet_gemm", 4, 400.0), ("add_elementwise", 8, 40.0)], steps=2)
    eager["wall_us_per_step"] = 900.0
    graphed = kernel_table([("nvjet_gemm", 4, 380.0)], steps=2)
    graphed["wall_us_per_step"] = 260.0
    fused = kernel_table([("nvjet_gemm", 4, 380.0), ("silu_mul_kernel", 2, 10.0)], steps=2)
    fused["wall_us_per_step"] = 240.0
    result = {
        "model": "qwen2.5-1.5b",
        "dtype": "bfloat16",
        "machine": "a GPU",
        "prefix": 1024,
        "steps": 2,
        "rows": [1, 8],
        "shapes": {"down": (1536, 8960)},
        "eager": eager,
        "graphs": graphed,
        "kernels": fused,
        "copy_gb_s": 4300.0,
        "products": {"cublas": {"down": {"1": 9.5, "1_gb_s": 2897.0, "8": 10.0, "8_gb_s": 2752.0}}},
        "choice_floors": {"read_us": 11.0, "pinned_copy_us": 14.0, "replay_us": 9.0},
    }
    text = markdown(result)
    assert "| matrix products | 2 | 200 | 2 | 190 | 2 | 190 |" in text
    assert "| elementwise | 4 | 20 | 0 | 0 | 0 | 0 |" in text
    assert "| fused (Triton) | 0 | 0 | 0 | 0 | 1 | 5 |" in text
    assert "| **graphs: all kernels / wall** | 2 | 190 / 260 |  |  |  |" in text
    assert "| **kernels: all kernels / wall** | 3 | 195 / 240 |  |  |  |" in text
    assert "| down (1536 × 8960) | cublas | 9.5 (2897) | 10.0 (2752) |" in text
    assert "one read back 11.0" in text
    del result["kernels"]
    result["kernels_failed"] = "CompilationError: no"
    text = markdown(result)
    assert "| **kernels:" not in text
    assert "The fused kernels failed and are not profiled: CompilationError: no" in text


def test_the_start_up_table_splits_the_load_and_reports_the_read_rate() -> None:
    marks = dict.fromkeys(startup.MARKS, 1.0)
    del marks["tokenizer"]
    result = {
        "model": "qwen2.5-1.5b",
        "device": "cuda",
        "dtype": "bfloat16",
        "graphs": {"cold": {"marks": marks, "capture_s": 0.5}, "warm": {"error": "boom"}},
        "read": {"bytes": 3_087_000_000, "first_s": 6.0, "second_s": 1.0, "first_gb_s": 0.51},
    }
    text = startup.markdown(result)
    header, rule, cold, warm = text.splitlines()[2:6]
    assert header.count("|") == rule.count("|") == cold.count("|") == warm.count("|")
    assert "| graphs | cold | 1.0 | 1.0 |  | 1.0 |" in cold
    assert "boom" in warm
    assert "3.09 GB with plain reads after these runs: 6.0 s (0.51 GB/s), then 1.0 s" in text
