"""The shared dataset loading of task envs: sources, column mapping, seeded order, errors."""

from __future__ import annotations

import copy
import json
import pickle
import warnings
from pathlib import Path
from typing import Any

import pytest

from gemgym.envs.dataset import (
    TERMINAL_STATE,
    DatasetEnv,
    DatasetSpec,
    DatasetWarning,
    Item,
    load_items,
)
from gemgym.errors import ConfigError, DatasetError
from helpers.extras import skip_without

ROWS = [{"problem": f"What is {i} + 1?", "solution": str(i + 1)} for i in range(10)]
SPEC = DatasetSpec(name="Toy", hub_id="nobody-here/toy-dataset-xyz", sample="math/gsm8k.jsonl")


class ToyEnv(DatasetEnv[str]):
    dataset_spec = SPEC

    def __init__(self, dataset: Any = None, columns: dict[str, str] | None = None) -> None:
        self._init_dataset(dataset, columns=columns)

    def observe(self, item: Item) -> str:
        return str(item["question"])

    def grade(self, action: str, item: Item) -> tuple[float, dict[str, Any]]:
        ok = action.strip() == str(item["answer"])
        return float(ok), {"correct": ok}


def _write_jsonl(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_in_memory_with_column_aliases_and_mapping() -> None:
    env = ToyEnv(ROWS, columns={"answer": "solution"})  # "problem" is a known alias
    obs, info = env.reset(seed=0)
    assert obs == ROWS[info["index"]]["problem"]
    assert env.step(ROWS[info["index"]]["solution"])[1:4] == (1.0, True, False)


def test_missing_column_names_the_columns() -> None:
    with pytest.raises(DatasetError, match=r"no column for 'answer'.*columns="):
        ToyEnv(ROWS)
    with pytest.raises(DatasetError, match="not a column"):
        ToyEnv(ROWS, columns={"answer": "nope"})


def test_local_jsonl_and_json_list(tmp_path: Path) -> None:
    p = _write_jsonl(tmp_path / "d.jsonl", ROWS)
    env = ToyEnv(str(p), columns={"answer": "solution"})
    assert len(env) == 10
    q = tmp_path / "d.json"
    q.write_text(json.dumps(ROWS))
    assert len(ToyEnv(q, columns={"answer": "solution"})) == 10


@skip_without("datasets")
def test_local_parquet_through_datasets(tmp_path: Path) -> None:
    import datasets

    p = tmp_path / "d.parquet"
    datasets.Dataset.from_list(ROWS).to_parquet(str(p))
    env = ToyEnv(str(p), columns={"question": "problem", "answer": "solution"})
    env.reset(options={"index": 3})
    assert env.item is not None and env.item["answer"] == "4"


def test_missing_file_and_bad_source() -> None:
    with pytest.raises(DatasetError, match="does not exist"):
        ToyEnv("no/such/file.jsonl")
    with pytest.raises(ConfigError):
        ToyEnv(42)
    with pytest.raises(DatasetError, match="empty"):
        ToyEnv([])


def test_offline_hub_id_error_says_how_to_provide_a_file() -> None:
    with pytest.raises(DatasetError) as e:
        ToyEnv("nobody-here/another-dataset")
    msg = str(e.value)
    assert "nobody-here/another-dataset" in msg and "dataset='path/to/file.jsonl'" in msg


def test_default_falls_back_to_the_sample_with_a_warning_but_explicit_id_errors() -> None:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        env = ToyEnv()
    assert any(issubclass(w.category, DatasetWarning) for w in caught)
    assert "sample" in env.source.origin and len(env) >= 10
    with pytest.raises(DatasetError, match="nobody-here/toy-dataset-xyz"):
        ToyEnv(SPEC.hub_id)


def test_seeded_order_is_deterministic_and_covers_each_epoch() -> None:
    a, b = ToyEnv(ROWS, {"answer": "solution"}), ToyEnv(ROWS, {"answer": "solution"})
    first = [a.reset(seed=7)[1]["index"]] + [a.reset()[1]["index"] for _ in range(19)]
    second = [b.reset(seed=7)[1]["index"]] + [b.reset()[1]["index"] for _ in range(19)]
    assert first == second
    assert sorted(first[:10]) == list(range(10)) and sorted(first[10:]) == list(range(10))
    assert first[:10] != first[10:]  # epoch 2 is reshuffled with seed + 1
    starts = {a.reset(seed=s)[1]["index"] for s in range(40)}
    assert len(starts) > 5


def test_fixed_index_and_bad_index() -> None:
    env = ToyEnv(ROWS, {"answer": "solution"})
    assert env.reset(options={"index": 4})[0] == ROWS[4]["problem"]
    with pytest.raises(ConfigError):
        env.reset(options={"index": 10})


def test_step_is_terminal_with_the_gem_sentinel() -> None:
    env = ToyEnv(ROWS, {"answer": "solution"})
    env.reset(seed=0)
    obs, r, te, tr, info = env.step("garbage")
    assert (obs, r, te, tr) == (TERMINAL_STATE, 0.0, True, False)
    assert "index" in info


def test_copies_share_items_and_file_sources_pickle_by_reference(tmp_path: Path) -> None:
    env = ToyEnv(_write_jsonl(tmp_path / "d.jsonl", ROWS), {"answer": "solution"})
    env.reset(seed=1)
    assert copy.deepcopy(env).source is env.source
    blob = pickle.dumps(env)
    assert b"What is 3 + 1" not in blob  # rows are reloaded from the cached source
    clone = pickle.loads(blob)
    assert clone.source is env.source and clone.item == env.item
    mem = ToyEnv(ROWS, {"answer": "solution"})
    mem.reset(seed=2)
    assert pickle.loads(pickle.dumps(mem)).item == mem.item


def test_load_items_shares_one_copy_per_source(tmp_path: Path) -> None:
    p = _write_jsonl(tmp_path / "d.jsonl", ROWS)
    cols = {"answer": "solution"}
    assert load_items(p, spec=SPEC, columns=cols) is load_items(str(p), spec=SPEC, columns=cols)


def test_the_old_private_module_is_a_deprecated_alias() -> None:
    import importlib
    import sys

    import gemgym.envs.dataset as public

    sys.modules.pop("gemgym.envs._dataset", None)
    with pytest.warns(DeprecationWarning, match=r"gemgym\.envs\.dataset"):
        old = importlib.import_module("gemgym.envs._dataset")
    sys.modules.pop("gemgym.envs._dataset", None)
    assert old.DatasetEnv is public.DatasetEnv
    assert old.load_items is public.load_items
    assert old._hub_offline is public._hub_offline
