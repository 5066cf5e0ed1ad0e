-- eldr.experiments - grids of simulations: tau (the locality band), K
-- (the number of decode workers), and the full sweep of `eldr sweep`.
--
-- Every grid splits the trace the way `eldr sim` does (a seeded random
-- split by default; `split`, `split_seed`, `calib_split`), fits on the
-- calibration rows and simulates the held-out rows, so no request is
-- routed by centroids fitted on itself. The grid is the core's (grid.h,
-- through eldr._sweep_grid, as `eldr sweep`: the baselines and ELDR at
-- every tau on the same workload, common random numbers), each row carries the change of
-- TPOT p50 against the best load-balancing baseline of its cell
-- (vs_best_pct; negative is better). With seeds = N > 1 the rows hold
-- means over N seeds with 95% confidence intervals (tpot_p50_ms_ci95,
-- vs_best_pct_ci95), computed by the core grid as `eldr sim --seeds N`.
local eldr = require "eldr"

local M = {}

local SIM_KEYS = {"output_tokens", "max_batch", "cost", "sample_pool", "min2", "concurrency",
                  "refit_every", "refit_window"}

local function check(opts, fn, known)
  opts = opts or {}
  if type(opts) ~= "table" then
    error(string.format("eldr.%s: bad argument 'options' (table expected, got %s)", fn,
                        type(opts)), 3)
  end
  local ok = {}
  for _, k in ipairs(known) do ok[k] = true end
  for _, k in ipairs(SIM_KEYS) do ok[k] = true end
  for k in pairs(opts) do
    if not ok[k] then
      error(string.format("eldr.%s: unknown option '%s'", fn, tostring(k)), 3)
    end
  end
  return opts
end

local function list_of(v, fn, name)
  if v == nil then return nil end
  if type(v) == "number" then return {v} end
  if type(v) ~= "table" or #v == 0 then
    error(string.format("eldr.%s: bad argument '%s' (number or non-empty list expected)",
                        fn, name), 3)
  end
  return v
end

local ROW_KEYS = {"policy", "tau", "tpot_p50_ms", "tpot_p99_ms", "queue_p50_ms",
                  "distinct_per_step", "reuse", "imbalance", "tokens_per_s", "vs_best_pct",
                  "seeds", "tpot_p50_ms_ci95", "tpot_p50_ms_per_seed", "vs_best_pct_ci95",
                  "distinct_vs_best_pct", "refits"}

-- The sweep on the core grid (eldr._sweep_grid, eldr.advise's engine, as
-- `eldr sweep`): with seeds > 1 each seed draws its split (unless pinned:
-- split_seed, a head split), fits every K on its calibration rows and
-- simulates its held-out rows; with one seed, one split. Every path gives
-- info.verdicts, one per K, by the verdict engine (src/core/verdict.c):
-- with one seed "no verdict at K 4", as `eldr sweep` and view 7 say.
local function sweep_grid(trace, opts, ks, taus, rates, baselines)
  local o = {workers = ks, tau = taus, seeds = opts.seeds, seed = opts.seed,
             split = opts.split, split_seed = opts.split_seed, calib_split = opts.calib_split,
             variant = opts.variant, layers = opts.layers, baselines = baselines,
             progress = opts.progress, cost_rule = opts.cost_rule, model = opts.model,
             online = opts.online, compare_fleets = #ks > 1}
  for _, k in ipairs(SIM_KEYS) do o[k] = opts[k] end
  if rates[1] then o.rate = rates end
  local ok, g = pcall(eldr._sweep_grid, trace, o)
  if not ok then   -- the caller's line, not this file's, before the message
    error((tostring(g):gsub("^[^\n]-%.lua:%d+: ", "")), 3)
  end
  local one = g.seeds < 2
  local rows = {}
  for _, r in ipairs(g.grid) do
    local row = {}
    for _, k in ipairs(ROW_KEYS) do row[k] = r[k] end
    if one then   -- one run: no interval, the rows as eldr.simulate gives them
      row.seeds, row.tpot_p50_ms_ci95, row.tpot_p50_ms_per_seed = nil, nil, nil
      row.vs_best_pct_ci95 = nil
    end
    row.K = r.K
    row.rate = rates[1] and r.rate or (opts.concurrency and "closed" or "trace")
    rows[#rows + 1] = row
  end
  return rows, {split = g.split, seeds = g.seeds, calib_rows = g.calib_rows,
                eval_rows = g.eval_rows, ci_covers = g.ci_covers,
                split_redrawn = g.split_redrawn, verdicts = g.verdicts}
end

--- experiments.sweep(trace, {model, tau, workers, rate, split, split_seed,
--- calib_split, seeds, progress, variant, layers, baselines, seed, online,
--- cost_rule, ...}) ->
--- rows {K, rate, policy, tau, tpot_p50_ms, tpot_p99_ms, distinct_per_step,
--- imbalance, vs_best_pct, ...; with seeds > 1 also seeds,
--- tpot_p50_ms_ci95, vs_best_pct_ci95, tpot_p50_ms_per_seed}, info {split,
--- seeds, calib_rows, eval_rows, ci_covers, split_redrawn, verdicts (one
--- per K, eldr.advise's verdict keys; answer "none" with one seed)}
function M.sweep(trace, opts)
  local fn = "sweep"
  opts = check(opts, fn, {"model", "tau", "workers", "rate", "calib_split", "split",
                          "split_seed", "seeds", "progress", "variant", "layers", "baselines",
                          "seed", "online", "cost_rule", "refit_every", "refit_window"})
  local model = opts.model
  local info = model and model:info()
  local taus = list_of(opts.tau, fn, "tau") or (info and {info.tau}) or {0, 0.05, 0.1, 0.2}
  local ks = list_of(opts.workers, fn, "workers") or (info and {info.K})
  if not ks then
    error("eldr.sweep: bad argument 'workers' (a list of K is needed without a model)", 2)
  end
  local rates = list_of(opts.rate, fn, "rate") or {false}
  local baselines = list_of(opts.baselines, fn, "baselines") or {"jsq", "rr", "p2c"}
  -- the bindings' one coercion rule (docs/lua-api.md, "Arguments")
  if opts.seeds ~= nil then eldr.check(opts.seeds, "integer", fn, "seeds", 1) end
  if opts.cost_rule ~= nil then eldr.check(opts.cost_rule, "boolean", fn, "cost_rule") end
  if opts.progress ~= nil and type(opts.progress) ~= "function" then
    error("eldr.sweep: bad argument 'progress' (function(done, total) expected)", 2)
  end
  for _, b in ipairs(baselines) do
    if b == "eldr" or b == "eldr-online" or b == "eldr-cost" then
      error("eldr.sweep: bad argument 'baselines' (" .. b .. " is not a baseline; eldr-online "
            .. "is online = true, eldr-cost is cost_rule = true)", 2)
    end
  end
  if opts.calib_split == 0 then
    error("eldr.sweep: bad argument 'calib_split' (0 leaves no calibration rows)", 2)
  end
  return sweep_grid(trace, opts, ks, taus, rates, baselines)
end

--- experiments.tau_grid(trace, {taus, model, workers, rate, ...}) -> rows:
--- ELDR at each tau beside the baselines, on one K.
function M.tau_grid(trace, opts)
  opts = check(opts, "experiments.tau_grid", {"taus", "model", "workers", "rate",
                                               "calib_split", "split", "split_seed", "seeds",
                                               "progress", "variant", "layers",
                                               "baselines", "seed"})
  local o = {}
  for k, v in pairs(opts) do if k ~= "taus" then o[k] = v end end
  o.tau = opts.taus or {0, 0.05, 0.1, 0.2, 0.5, 2}
  o.workers = opts.workers and {opts.workers}
  if not o.workers and not o.model then o.workers = {4} end
  return M.sweep(trace, o)
end

--- experiments.k_grid(trace, {ks, tau, rate, ...}) -> rows: one per K,
--- with the K-means objective and cluster sizes beside the simulation of
--- ELDR and the baselines.
function M.k_grid(trace, opts)
  opts = check(opts, "experiments.k_grid", {"ks", "tau", "rate", "calib_split", "split",
                                             "split_seed", "seeds", "progress", "variant",
                                             "layers", "baselines", "seed"})
  local o = {}
  for k, v in pairs(opts) do if k ~= "ks" then o[k] = v end end
  o.workers = opts.ks or {2, 4, 8}
  o.tau = opts.tau or 0.1
  return M.sweep(trace, o)
end

M._help = {
  ["eldr.experiments.sweep"] = "eldr.experiments.sweep(trace, opts) -> rows: what eldr.sweep "
    .. "does (tau x K x rate grid)",
  ["eldr.experiments.tau_grid"] = "eldr.experiments.tau_grid(trace, {taus, model | workers, "
    .. "rate, ...}) -> rows: ELDR per tau beside the baselines",
  ["eldr.experiments.k_grid"] = "eldr.experiments.k_grid(trace, {ks, tau, rate, ...}) -> rows: "
    .. "ELDR and the baselines per number of workers K",
}

return M
