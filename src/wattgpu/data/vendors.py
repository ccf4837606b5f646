"""GPU names of other vendors: WattGPU models NVIDIA GPUs only, and says so in one line.

A name the GPU catalogue lacks is checked here before any other refusal, so that "MI300X" is
told it is AMD's rather than offered the closest NVIDIA names. The words are those each vendor's
product names hold ("Instinct MI300X", "Radeon PRO W7900", "Gaudi 3", "Arc A770", "Apple M2
Ultra", "TPU v5e"); no NVIDIA product name holds one.
"""

from __future__ import annotations

import re

from wattgpu.data.names import name_words

# vendor -> pattern matched against each word of a name (lower case, see ``name_words``)
VENDOR_WORDS = {
    "AMD": re.compile(r"amd|radeon|instinct|firepro|mi\d{2,3}[a-z]?|rx\d*"),
    "Intel": re.compile(r"intel|habana|gaudi\d?|arc|ponte|xeon"),
    "Apple": re.compile(r"apple"),
    "Google": re.compile(r"google|tpu\w*"),
    "AWS": re.compile(r"aws|trainium\d?|inferentia\d?"),
    "Huawei": re.compile(r"huawei|ascend"),
    "Qualcomm": re.compile(r"qualcomm"),
}
# Apple's chips are "M2 Ultra", "M3 Max", "M4 Pro": the chip word with one of these after it
# (NVIDIA's "Tesla M4" has none).
APPLE_CHIP = re.compile(r"m[1-9]")
APPLE_TIERS = frozenset({"pro", "max", "ultra"})
NVIDIA_ONLY = "WattGPU models NVIDIA GPUs only"


def other_vendor(name: str) -> str | None:
    """The vendor of a GPU or accelerator name that is not NVIDIA's, or ``None``.

    ``"Instinct MI300X"`` -> ``"AMD"``; ``"Gaudi 3"`` -> ``"Intel"``; ``"H100"`` -> ``None``.
    """
    words = name_words(name)
    if "nvidia" in words:
        return None
    for vendor, pattern in VENDOR_WORDS.items():
        if any(pattern.fullmatch(word) for word in words):
            return vendor
    for word, after in zip(words, words[1:], strict=False):
        if APPLE_CHIP.fullmatch(word) and after in APPLE_TIERS:
            return "Apple"
    return None


def other_vendor_problem(name: str) -> str | None:
    """Why a name is refused when another vendor makes it (to follow the name), else ``None``."""
    vendor = other_vendor(name)
    return None if vendor is None else f"is made by {vendor}: {NVIDIA_ONLY}"


__all__ = ["NVIDIA_ONLY", "other_vendor", "other_vendor_problem"]
