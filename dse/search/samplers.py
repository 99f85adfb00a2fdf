"""Optuna samplers as a study uses them. NSGA-II here is Optuna's own with two lookups kept
up to date instead of recomputed: Optuna finds a new trial's generation and a generation's
parents by scanning every stored trial on each ask (O(trials) per ask, O(trials^2) per
study: most of a one-process search's cost past a few thousand trials). The same seed gives
the same trials (tests/search/test_samplers.py)."""

from __future__ import annotations

from collections.abc import Sequence

import optuna
from optuna.trial import FrozenTrial, TrialState

MIN_POPULATION = 2  # Optuna's NSGA-II: crossover takes two parents


GP_MISSING = ("Optuna's GP sampler needs PyTorch, which dse does not install (pip install "
              "torch); or use nsga2, tpe or random")


def gp_available() -> bool:
    import importlib.util

    return importlib.util.find_spec("torch") is not None


class NSGAII(optuna.samplers.NSGAIISampler):
    """Optuna's NSGA-II with O(1) generation and parent lookups. `local`: every trial of the
    study is told through this sampler in this process (the in-memory study of a
    one-process run, filled from the storage before the first ask): the count of complete
    trials per generation is then kept as trials are told instead of recounted on each ask.
    Otherwise Optuna's own lookups run (trials told by other workers)."""

    def __init__(self, *, local: bool = False, population_size: int = 50,
                 **kwargs: object) -> None:
        # A generation needs two parents: a population of one (the default population is
        # the batch size, and `--batch 1` is a valid batch) is raised to two.
        super().__init__(population_size=max(population_size, MIN_POPULATION),
                         **kwargs)  # type: ignore[arg-type]
        self._local = local
        self._counts: dict[int, int] | None = None  # generation -> complete trials
        self._parents: dict[tuple[int, int], list[FrozenTrial]] = {}

    def _count(self, study: optuna.Study) -> dict[int, int]:
        if self._counts is None:
            key = self._get_generation_key()
            counts: dict[int, int] = {}
            for t in study._get_trials(deepcopy=False, states=[TrialState.COMPLETE],
                                       use_cache=True):
                g = t.system_attrs.get(key, -1)
                counts[g] = counts.get(g, 0) + 1
            self._counts = counts
        return self._counts

    def get_trial_generation(self, study: optuna.Study, trial: FrozenTrial) -> int:
        key = self._get_generation_key()
        generation = trial.system_attrs.get(key, None)
        if generation is not None or not self._local:
            return super().get_trial_generation(study, trial)
        counts = self._count(study)
        top = max(counts, default=0)
        top = max(top, 0)
        assert self._population_size is not None
        generation = top + (counts.get(top, 0) >= self._population_size)
        study._storage.set_trial_system_attr(trial._trial_id, key, generation)
        return generation

    def after_trial(self, study: optuna.Study, trial: FrozenTrial, state: TrialState,
                    values: Sequence[float] | None) -> None:
        super().after_trial(study, trial, state, values)
        if self._local and self._counts is not None and state == TrialState.COMPLETE:
            g = trial.system_attrs.get(self._get_generation_key(), -1)
            self._counts[g] = self._counts.get(g, 0) + 1

    def added(self, trials: Sequence[FrozenTrial]) -> None:
        """Trials added to the study without this sampler (other workers' finished trials,
        dse.search.workers): counted in their generations as told trials are."""
        if self._local and self._counts is not None:
            key = self._get_generation_key()
            for t in trials:
                if t.state == TrialState.COMPLETE:
                    g = t.system_attrs.get(key, -1)
                    self._counts[g] = self._counts.get(g, 0) + 1

    def get_parent_population(self, study: optuna.Study, generation: int
                              ) -> list[FrozenTrial]:
        if generation == 0:
            return []
        key = (study._study_id, generation)
        if self._local and key in self._parents:
            return self._parents[key]
        parents = super().get_parent_population(study, generation)
        if self._local:
            # Optuna returns a cached population in storage order (its first call returns
            # the selection's order): the same here, for the same crossover draws.
            self._parents[key] = sorted(parents, key=lambda t: t._trial_id)
        return parents
