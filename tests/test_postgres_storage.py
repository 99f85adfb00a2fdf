"""The `postgres_url` fixture serves an Optuna study that several processes share: two
workers (spawned, as on separate machines) together complete exactly the trials asked for,
numbered once each."""

from __future__ import annotations

import multiprocessing
import os

import optuna

N_TRIALS = 12
WORKERS = 2


def _objective(trial: optuna.Trial) -> tuple[float, float]:
    trial.set_user_attr("pid", os.getpid())
    x = trial.suggest_float("x", 0.0, 1.0)
    return x, (1.0 - x) ** 2


def _worker(url: str, name: str, n_trials: int, shared_budget: bool, barrier) -> None:
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = optuna.load_study(study_name=name, storage=url,
                              sampler=optuna.samplers.RandomSampler())
    callbacks = [optuna.study.MaxTrialsCallback(n_trials)] if shared_budget else []
    barrier.wait(timeout=60)  # the workers run at the same time
    study.optimize(_objective if len(study.directions) == 2 else _single, n_trials=n_trials,
                   callbacks=callbacks)


def _single(trial: optuna.Trial) -> float:
    return _objective(trial)[0]


def _run_workers(url: str, name: str, n_trials: int, shared_budget: bool) -> list[int]:
    """Run WORKERS spawned processes on the study; their pids."""
    context = multiprocessing.get_context("spawn")
    barrier = context.Barrier(WORKERS)
    workers = [context.Process(target=_worker,
                               args=(url, name, n_trials, shared_budget, barrier))
               for _ in range(WORKERS)]
    for w in workers:
        w.start()
    for w in workers:
        w.join(timeout=120)
    assert [w.exitcode for w in workers] == [0] * WORKERS
    return [w.pid for w in workers]


def test_two_processes_share_one_study(postgres_url):
    name = "dse-test-two-workers"
    study = optuna.create_study(study_name=name, storage=postgres_url,
                                directions=["minimize", "minimize"],
                                sampler=optuna.samplers.RandomSampler(seed=0))
    pids = _run_workers(postgres_url, name, N_TRIALS // WORKERS, shared_budget=False)

    trials = optuna.load_study(study_name=name, storage=postgres_url).get_trials()
    assert len(trials) == N_TRIALS
    assert all(t.state is optuna.trial.TrialState.COMPLETE for t in trials)
    assert sorted(t.number for t in trials) == list(range(N_TRIALS))
    assert {t.user_attrs["pid"] for t in trials} == set(pids)  # both workers took part
    assert study.best_trials  # the Pareto set reads back from the shared storage


def test_shared_budget_with_max_trials_callback(postgres_url):
    """A budget shared by the workers (Optuna's MaxTrialsCallback): each runs until the study
    holds N complete trials. A worker's trial in flight when the budget is met still completes,
    so the total is N up to N + workers - 1; an exact total needs per-worker budgets (above)."""
    name = "dse-test-shared-budget"
    optuna.create_study(study_name=name, storage=postgres_url)
    _run_workers(postgres_url, name, N_TRIALS, shared_budget=True)
    trials = optuna.load_study(study_name=name, storage=postgres_url).get_trials()
    assert all(t.state is optuna.trial.TrialState.COMPLETE for t in trials)
    assert N_TRIALS <= len(trials) <= N_TRIALS + WORKERS - 1
    assert sorted(t.number for t in trials) == list(range(len(trials)))
