"""What the edit service refuses before an edit starts: a full engine (503 "overloaded"),
another model, an adapter it does not serve, program mode where the processor is off."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from cad.engine.protocol import EditError, parse_edit_request
from cad.selector import DraftConfig

pytestmark = pytest.mark.engine


@pytest.fixture
def service(tmp_path):
    pytest.importorskip("vllm")
    from cad.engine.service import EditService

    adapter = tmp_path / "selector"
    adapter.mkdir()
    models = SimpleNamespace(
        base_model_paths=[SimpleNamespace(name="team/coder", model_path=str(tmp_path))],
        lora_requests={"selector": SimpleNamespace(lora_path=str(adapter))},
    )
    return EditService(
        None, None, ("team/coder",), models, None, None, max_edits=2, draft_config=DraftConfig()
    )


def request(**fields):
    return parse_edit_request({"document": "a\n", "instruction": "x", **fields})


def test_admits_the_served_model_and_adapters(service, tmp_path) -> None:
    assert service.admit(request()) is None
    assert service.admit(request(model="team/coder")) is None
    assert service.admit(request(model=str(tmp_path) + "/")) is None
    selector = service.serving_models.lora_requests["selector"]
    assert service.admit(request(adapter="selector")) is selector
    assert service.admit(request(adapter=str(tmp_path / "selector"))) is selector


@pytest.mark.parametrize(
    ("fields", "running", "status", "code"),
    [
        ({"model": "other"}, 0, 400, "model_mismatch"),
        ({"adapter": "other"}, 0, 400, "unknown_adapter"),
        ({}, 2, 503, "overloaded"),
    ],
)
def test_refusals(service, fields: dict, running: int, status: int, code: str) -> None:
    service.running = running
    with pytest.raises(EditError) as caught:
        service.admit(request(**fields))
    assert (caught.value.status, caught.value.code) == (status, code)
    assert "\n" not in caught.value.message


def test_a_full_engine_names_the_option_that_raises_its_limit(service) -> None:
    service.running = 2
    with pytest.raises(EditError, match="limit of 2 edits") as caught:
        service.check_capacity()
    assert "cad-engine --max-edits N" in caught.value.message
    assert "CAD_ENGINE" not in caught.value.message


def test_program_mode_needs_the_processor(service) -> None:
    service.program_refusal = "this engine runs without the program logits processor"
    with pytest.raises(EditError, match="without the program logits processor"):
        service.admit(request())
    assert service.admit(request(mode="rewrite")) is None
