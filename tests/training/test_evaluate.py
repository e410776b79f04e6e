"""Evaluation scores and the span-perturbation study."""

from __future__ import annotations

import random

from hypothesis import given
from hypothesis import strategies as st

from cad.resolver import CopyLines, Gen, Program, oracle, resolve
from cad.selector import Decoder
from cad.training import EditExample, load_humanevalpack
from cad.training.evaluate import EditScore, evaluate, summarize
from cad.training.perturb import perturb_program, perturbation_study
from cad.training.scoring import Endpoints

EDITS = [
    EditExample("set", "Set b to 7.", "a = 1\nb = 2\nc = 3\n", "a = 1\nb = 7\nc = 3\n"),
    EditExample("drop", "Drop b.", "a = 1\nb = 2\nc = 3\n", "a = 1\nc = 3\n"),
]


def test_endpoint_accuracy_counts_missed_and_spurious_copies() -> None:
    reference = Program((CopyLines(1, 2), Gen("x\n"), CopyLines(4, 9)))
    scores = Endpoints()
    scores.add(Program((CopyLines(1, 2), CopyLines(4, 8))), reference)
    assert (scores.start_hits, scores.end_hits, scores.count) == (2, 1, 2)
    scores.add(Program((CopyLines(1, 1), CopyLines(2, 2), CopyLines(3, 9))), reference)
    assert (scores.start_hits, scores.end_hits, scores.count) == (3, 3, 5)
    scores.add(None, reference)
    assert scores.count == 7
    assert scores.start_acc == 3 / 7 and scores.end_acc == 3 / 7


def test_forced_oracle_decoding_scores_perfectly(tiny_qwen, monkeypatch) -> None:
    decoder = Decoder(tiny_qwen, max_new_tokens=64)
    follow = decoder.edit

    def oracle_edit(document, instruction, **options):
        edit = next(e for e in EDITS if e.before == document and e.instruction == instruction)
        return follow(document, instruction, program=oracle(edit.before, edit.after), **options)

    monkeypatch.setattr(decoder, "edit", oracle_edit)
    seen: list[EditScore] = []
    report = evaluate(decoder, EDITS, baseline=True, on_edit=seen.append)
    assert [row.id for row in seen] == ["set", "drop"]
    assert (report.n, report.em, report.valid, report.start_acc, report.end_acc) == (2, 1, 1, 1, 1)
    assert 0.5 < report.coverage < 1
    assert report.ar_wall_s is not None and report.speedup is not None and report.speedup > 0
    assert report.to_dict()["n"] == 2 and "rows" not in report.to_dict()


def test_only_exact_edits_are_regenerated_for_the_ar_timing(tiny_qwen, monkeypatch) -> None:
    from cad.training import evaluate as evaluation

    regenerated: list[str] = []
    regenerate = evaluation.regenerate

    def counting(loaded, before, instruction, after):
        regenerated.append(instruction)
        return regenerate(loaded, before, instruction, after)

    monkeypatch.setattr(evaluation, "regenerate", counting)
    report = evaluate(Decoder(tiny_qwen, max_new_tokens=24), EDITS, baseline=True)
    assert report.em == 0 and regenerated == [] and report.ar_wall_s is None


def test_an_untrained_model_scores_within_bounds(tiny_qwen) -> None:
    report = evaluate(Decoder(tiny_qwen, max_new_tokens=24), EDITS)
    assert report.n == 2 and report.em == 0
    for value in (report.valid, report.start_acc, report.end_acc, report.coverage):
        assert 0 <= value <= 1
    assert report.generated_tokens > 0 and report.ar_wall_s is None
    assert len(report.to_dict(rows=True)["rows"]) == 2


def test_summary_of_nothing_is_zero() -> None:
    report = summarize([])
    assert (report.n, report.em, report.start_acc, report.timed) == (0, 0, 0, 0)
    assert report.wall_s is report.speedup is None


def test_speed_is_timed_over_exact_edits_only() -> None:
    def row(identifier: str, exact: bool, wall: float) -> EditScore:
        return EditScore(identifier, exact, True, 1, 1, 1, 5, 10, 5, wall, 1.0)

    report = summarize([row("fast-but-wrong", False, 0.01), row("right", True, 0.5)])
    assert (report.timed, report.wall_s, report.ar_wall_s, report.speedup) == (1, 0.5, 1.0, 2.0)


@given(
    lines=st.integers(1, 30),
    spans=st.lists(st.tuples(st.integers(1, 30), st.integers(0, 5)), min_size=1, max_size=6),
    eps=st.integers(0, 4),
    seed=st.integers(0, 10_000),
)
def test_perturbed_programs_stay_valid_and_zero_noise_changes_nothing(
    lines: int, spans: list[tuple[int, int]], eps: int, seed: int
) -> None:
    ops = [CopyLines(min(s, lines), min(s + w, lines)) for s, w in spans]
    program = Program((*ops, Gen("tail\n")))
    document = "".join(f"line {i}\n" for i in range(1, lines + 1))
    perturbed = perturb_program(program, eps, lines, random.Random(seed))
    resolve(perturbed, document)
    for old, new in zip(program.ops, perturbed.ops, strict=True):
        if isinstance(old, CopyLines):
            assert abs(new.start - old.start) <= 2 * eps and new.start <= new.end
        else:
            assert new == old
    assert perturb_program(program, 0, lines, random.Random(seed)) == program


def test_perturbation_study_collapses_exact_match_and_is_reproducible() -> None:
    edits = load_humanevalpack("python")[:40]
    clean = perturbation_study(edits, 0)
    assert (clean.em, clean.trimmed_em, clean.valid, clean.start_acc) == (1, 1, 1, 1)
    noisy = perturbation_study(edits, 1, trials=3, seed=7)
    assert noisy.em < 0.5 and noisy.valid == 1 and noisy.start_acc < 1
    assert perturbation_study(edits, 1, trials=3, seed=7) == noisy
    assert perturbation_study(edits, 3).em <= perturbation_study(edits, 1).em + 0.1


def test_edits_of_several_files_are_decoded_across_files_and_scored(tiny_qwen, monkeypatch) -> None:
    from cad.resolver import oracle_multi
    from cad.selector import MultiDecoder
    from tests.training.test_examples import MOVE

    follow = MultiDecoder.edit

    def oracle_edit(self, files, instruction, **options):
        program = oracle_multi(MOVE.before_files, MOVE.after_files)
        return follow(self, files, instruction, program=program, **options)

    monkeypatch.setattr(MultiDecoder, "edit", oracle_edit)
    report = evaluate(Decoder(tiny_qwen, max_new_tokens=256), [MOVE, *EDITS[:1]])
    multi = report.rows[0]
    assert (multi.exact, multi.valid, multi.endpoints, multi.ar_wall_s) == (True, True, 0, None)
    assert 0 < multi.copied_tokens == multi.output_tokens
    assert report.n == 2 and report.em >= 0.5


def test_an_untrained_model_on_several_files_scores_valid_or_truncated(tiny_qwen) -> None:
    from tests.training.test_examples import MOVE

    report = evaluate(Decoder(tiny_qwen, max_new_tokens=16), [MOVE])
    (row,) = report.rows
    assert not row.exact
    assert row.generated_tokens <= 16
