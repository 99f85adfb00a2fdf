"""Traffic between the dies of one package: what a split into several dies costs beyond its
silicon (dse.model.area charges the die-to-die PHYs). Pure numpy, no I/O.

A package whose dies sit side by side (B200's two dies, MI300X's four I/O dies) presents one
memory: addresses interleave over every HBM stack, so a byte a die reads lives on another
die's stacks with probability (p - 1) / p for p dies in the plane, and crosses h die-to-die
joints on its way, h the mean distance between two different dies of the layout
(dse.model.package.layout: one row up to two dies, else two rows; Manhattan distance):

    share     = (p - 1) / p x h                    (joint crossings per DRAM byte)
    h         = (c^2 (r^3 - r) + r^2 (c^3 - c)) / (3 p (p - 1))   for r rows x c columns
    energy    = share x e_d2d                      J per DRAM byte (added to the level's)
    bandwidth = min(DRAM, joints x B_d2d / share)  what the joints let the DRAM deliver

B200: p = 2, h = 1, share 1/2: 8 TB/s of HBM puts 4 TB/s on the 10 TB/s NV-HBI (not a
bound) and 0.5 pJ/bit x 4 TB/s = 16 W. Only DRAM traffic is counted: hits in another die's
L2 slices also cross, which the model does not split out (docs: model/area-power-cost.md, Package
geometry).
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from dse.model.batch import DesignBatch
from dse.model.package import d2d_joints, layout
from dse.spec.hardware import CHANNEL_INTERFACES, HBM_INTERFACES
from dse.spec.technology import TechSpec


def plane_dies(db: DesignBatch) -> np.ndarray:
    """[N] dies side by side on the interposer (stacked dies share their base die's)."""
    tech = db.spec.technology
    pk = tech.package if tech else None
    return np.full(db.n, float(pk.in_plane)) if pk and pk.in_plane else \
        np.asarray(db.dies, dtype=float) * np.ones(db.n)


def mean_hops(dies: np.ndarray) -> np.ndarray:
    """[N] mean die-to-die joints between two different dies of the layout (0 for one die)."""
    p = np.asarray(dies, dtype=float)
    r, c = layout(p)
    pairs = np.where(p > 1, p * (p - 1), 1.0)
    total = (c**2 * (r**3 - r) + r**2 * (c**3 - c)) / 3.0
    return np.where(p > 1, total / pairs, 0.0)


def crossing_share(db: DesignBatch) -> np.ndarray:
    """[N] die-to-die joints a DRAM byte crosses on average: (p - 1) / p x mean hops."""
    p = plane_dies(db)
    return np.where(p > 1, (p - 1) / np.maximum(p, 1.0) * mean_hops(p), 0.0)


def link_bandwidth(db: DesignBatch, tech: TechSpec) -> np.ndarray:
    """[N] B/s all die-to-die joints carry together (both directions; inf for one die or a
    node without package rules)."""
    rules = tech.package
    p = plane_dies(db)
    if rules is None:
        return np.full(db.n, np.inf)
    pk = db.spec.technology.package if db.spec.technology else None
    per_joint = pk.d2d_bandwidth if pk and pk.d2d_bandwidth else rules.d2d.bandwidth
    return np.where(p > 1, d2d_joints(p) * per_joint, np.inf)


def crossing_energy(db: DesignBatch, tech: TechSpec) -> np.ndarray:
    """[N] J per DRAM byte spent on the die-to-die joints it crosses (0 for one die)."""
    if tech.package is None:
        return np.zeros(db.n)
    return crossing_share(db) * tech.package.d2d.energy


def dram_bandwidth_cap(db: DesignBatch, tech: TechSpec) -> np.ndarray:
    """[N] B/s the joints let the package's DRAM deliver in all (inf: no bound)."""
    share = crossing_share(db)
    with np.errstate(divide="ignore"):
        return np.where(share > 0, link_bandwidth(db, tech) / np.where(share > 0, share, 1.0),
                        np.inf)


def package_dram(db: DesignBatch) -> np.ndarray:
    """[L] bool: DRAM levels whose controllers sit on the package's dies (HBM, DDR, LPDDR,
    GDDR; not CXL or memory behind another chip's link)."""
    return np.array([lv.kind == "dram" and lv.interface in (*HBM_INTERFACES,
                                                           *CHANNEL_INTERFACES)
                     for lv in db.spec.memory])


def with_joint_bound(db: DesignBatch, tech: TechSpec) -> DesignBatch:
    """`db` with the package's DRAM bandwidth held to what its die-to-die joints carry
    (dram_bandwidth_cap; each such level scaled by the same factor). Unchanged for one die."""
    share = crossing_share(db)
    levels = package_dram(db)
    if not np.any(share > 0) or not levels.any():
        return db
    peak = db.peak_bandwidth[:, levels].sum(axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        factor = np.where(peak > 0, np.minimum(1.0, dram_bandwidth_cap(db, tech) / peak), 1.0)
    if np.all(factor >= 1.0):
        return db
    scale = np.where(levels[None, :], factor[:, None], 1.0)
    return replace(db, peak_bandwidth=db.peak_bandwidth * scale, bandwidth=db.bandwidth * scale,
                   gather_bandwidth=db.gather_bandwidth * scale)
