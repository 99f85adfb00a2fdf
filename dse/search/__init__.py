"""Studies: Optuna searches over designs (space: the study resolved; objective: a batch of
designs evaluated at once; run: batched ask/tell, storage, workers; pareto: fronts and
hypervolume; outputs: tables, plots and the summary)."""
