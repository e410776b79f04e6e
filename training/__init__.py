"""Datasets, span-selector training and evaluation."""

from cad.training.datasets import (
    DatasetError,
    EditExample,
    content_id,
    load_edits,
    load_humanevalpack,
    load_jsonl,
    split_by_id,
    write_jsonl,
)

__all__ = [
    "DatasetError",
    "EditExample",
    "content_id",
    "load_edits",
    "load_humanevalpack",
    "load_jsonl",
    "split_by_id",
    "write_jsonl",
]
