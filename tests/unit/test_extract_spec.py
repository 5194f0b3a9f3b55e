"""Job spec and dataset validation (one-line errors), EAGLE-3 layers, the batch plan."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bot.core.errors import UserError
from bot.extract.dataset import Record, parse_line, plan_batches, survey
from bot.extract.spec import eagle3_layers, load_spec, resolve_layers


def _spec_file(tmp_path: Path, text: str, name: str = "spec.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_yaml_spec_loads_with_paths_relative_to_the_file(tmp_path: Path) -> None:
    path = _spec_file(tmp_path, "name: run1\ndataset: d.jsonl\noutput_dir: out\nhost: gpu-01\n")
    spec = load_spec(path)
    assert spec.dataset == tmp_path / "d.jsonl"
    assert spec.output_dir == tmp_path / "out"
    assert (spec.host, spec.extractor, spec.device, spec.layers) == (
        "gpu-01",
        "builtin",
        "auto",
        "eagle3",
    )


def test_json_spec_loads(tmp_path: Path) -> None:
    body = {"name": "j", "dataset": "/d.jsonl", "output_dir": "/o", "batch_size": 4}
    assert load_spec(_spec_file(tmp_path, json.dumps(body), "s.json")).batch_size == 4


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("name: x\ndataset: d\n", "key 'output_dir': Field required"),
        ("name: x\ndataset: d\noutput_dir: o\nbatch_size: 0\n", "key 'batch_size'"),
        ("name: x\ndataset: d\noutput_dir: o\nhost: 'a;rm -rf /'\n", "key 'host'"),
        ("name: x\ndataset: d\noutput_dir: o\nextractor: 'os.system'\n", "key 'extractor'"),
        ("name: x\ndataset: d\noutput_dir: o\ndevice: tpu\n", "key 'device'"),
        ("name: x\ndataset: d\noutput_dir: o\nlayers: [1, 1]\n", "key 'layers'"),
        (
            "name: x\ndataset: d\noutput_dir: o\nmodel: {hidden: 30, heads: 4}\n",
            "multiple of heads",
        ),
        ("name: x\ndataset: d\noutput_dir: o\nbogus: 1\n", "key 'bogus'"),
        ("- a\n- b\n", "top level must be a mapping"),
        ("name: [unclosed\n", "not valid YAML"),
    ],
)
def test_bad_specs_fail_with_one_line_exit_2(tmp_path: Path, text: str, needle: str) -> None:
    with pytest.raises(UserError) as info:
        load_spec(_spec_file(tmp_path, text))
    assert info.value.exit_code == 2
    assert needle in info.value.message
    assert "\n" not in info.value.message
    assert str(tmp_path) in info.value.message


def test_missing_spec_file(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="cannot read spec"):
        load_spec(tmp_path / "nope.yaml")


def test_eagle3_layers_low_mid_high_plus_last() -> None:
    assert eagle3_layers(32) == (2, 16, 29, 32)
    assert eagle3_layers(6) == (2, 3, 6)
    assert eagle3_layers(1) == (1,)
    assert resolve_layers("all", 3) == (0, 1, 2, 3)
    assert resolve_layers([3, 0], 4) == (0, 3)
    with pytest.raises(UserError, match="out of range"):
        resolve_layers([9], 4)


@pytest.mark.parametrize(
    ("line", "needle"),
    [
        ("not json", "not valid JSON"),
        ("[1]", "JSON object"),
        ('{"id": "../etc/passwd", "text": "x"}', "'id'"),
        ('{"id": true, "text": "x"}', "'id'"),
        ('{"id": "a"}', "exactly one of"),
        ('{"id": "a", "text": "x", "input_ids": [1]}', "exactly one of"),
        ('{"id": "a", "input_ids": [1, -2]}', "exactly one of"),
        ('{"id": "a", "input_ids": []}', "exactly one of"),
    ],
)
def test_bad_dataset_lines(line: str, needle: str) -> None:
    with pytest.raises(UserError, match=needle) as info:
        parse_line(line, "d.jsonl:7")
    assert info.value.message.startswith("d.jsonl:7:")


def test_good_dataset_lines() -> None:
    assert parse_line('{"id": 7, "text": "hi"}', "x") == Record("7", text="hi")
    assert parse_line('{"id": "a.b", "input_ids": [3, 4]}', "x") == Record("a.b", input_ids=(3, 4))


def test_survey_counts_and_rejects_duplicates(tmp_path: Path) -> None:
    data = tmp_path / "d.jsonl"
    data.write_text('{"id": "a", "text": "x"}\n\n{"id": "b", "text": "y"}\n')
    assert survey(data, {"b", "zzz"}) == (2, 1)
    data.write_text('{"id": "a", "text": "x"}\n{"id": "a", "text": "y"}\n')
    with pytest.raises(UserError, match="duplicate id"):
        survey(data)
    data.write_text("\n")
    with pytest.raises(UserError, match="empty"):
        survey(data)


def _dataset(tmp_path: Path, lengths: list[int]) -> Path:
    data = tmp_path / "d.jsonl"
    data.write_text(
        "".join(
            json.dumps({"id": f"s{i}", "input_ids": [1] * n}) + "\n" for i, n in enumerate(lengths)
        )
    )
    return data


def test_plan_groups_by_length_within_windows_and_ignores_progress(tmp_path: Path) -> None:
    data = _dataset(tmp_path, [5, 1, 4, 2, 3, 9, 7, 8])

    def plan(skip: set[str]) -> list[list[str]]:
        batches = plan_batches(data, lambda r: r.input_ids or (), 2, 2, lambda s: s in skip)
        return [[item.id for item in batch] for batch in batches]

    assert plan(set()) == [["s1", "s3"], ["s2", "s0"], ["s4", "s6"], ["s7", "s5"]]
    # a partly done window keeps its batches exactly; a fully done one is skipped
    assert plan({"s1", "s2"}) == plan(set())
    assert plan({"s0", "s1", "s2", "s3"}) == [["s4", "s6"], ["s7", "s5"]]
