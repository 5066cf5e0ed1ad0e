-- eldr.experiments - grids of simulations: tau (the locality band), K
-- (the number of decode workers), and the full sweep of `eldr sweep`.
--
-- Every grid splits the trace the way `eldr sim` does (eldr.calib_split:
-- a seeded random split by default; `split`, `split_seed`, `calib_split`),
-- fits on the calibration rows and simulates the held-out rows, so no
-- request is routed by centroids fitted on itself. Each (K, rate) cell is
-- one eldr.simulate call (the baselines and ELDR at every tau on the same
-- workload: common random numbers), and each row carries the change of
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

local function sim_opts(opts, extra)
  local o = {}
  for _, k in ipairs(SIM_KEYS) do o[k] = opts[k] end
  for k, v in pairs(extra) do o[k] = v end
  return o
end

local ROW_KEYS = {"policy", "tau", "tpot_p50_ms", "tpot_p99_ms", "queue_p50_ms",
                  "distinct_per_step", "reuse", "imbalance", "tokens_per_s", "vs_best_pct",
                  "seeds", "tpot_p50_ms_ci95", "tpot_p50_ms_per_seed", "vs_best_pct_ci95",
                  "distinct_vs_best_pct", "refits"}

-- Rows of one simulate call, tagged with the grid coordinates.
local function rows_of(results, tags, out)
  for _, r in ipairs(results) do
    local row = {}
    for _, k in ipairs(ROW_KEYS) do row[k] = r[k] end
    for k, v in pairs(tags) do row[k] = v end
    out[#out + 1] = row
  end
end

-- A model with K centroids for a recipe fitted on calib (zero rows left out).
local function fit_k(recipe, calib, K, seed, tau)
  local sigs = recipe:signatures(calib)
  local zero = sigs:zero_rows()
  if #zero > 0 then
    local skip, keep = {}, {}
    for _, r in ipairs(zero) do skip[r] = true end
    for r = 1, #sigs do if not skip[r] then keep[#keep + 1] = r end end
    sigs = sigs:sub(keep)
  end
  local km = eldr.kmeans(sigs, {k = K, seed = seed})
  local _, _, k = calib:geometry()
  return eldr.model(recipe, km.centroids, {top_k = k, tau = tau or 0.1, seed = seed}), km
end

-- The split of opts (split, split_seed, calib_split) by eldr.calib_split;
-- its errors name fn's options.
local SPLIT_ARGS = {size = "calib_split", mode = "split", seed = "split_seed", spec = "calib_split"}
local function split_of(trace, opts, fn)
  local ok, calib, eval, info = pcall(eldr.calib_split, trace, {
    size = opts.calib_split, mode = opts.split, seed = opts.split_seed})
  if not ok then
    local msg = tostring(calib):gsub("^eldr%.calib_split: bad argument '(%w+)'", function(a)
      return string.format("eldr.%s: bad argument '%s'", fn, SPLIT_ARGS[a] or a)
    end)
    error(msg, 3)
  end
  info.calib, info.eval = nil, nil
  return calib, eval, info
end

-- With seeds > 1 the calibration split is redrawn per seed, as eldr.simulate
-- and eldr.advise do, so an interval covers which rows calibrate as well as
-- the arrivals (issue 22); not when the split is fixed on purpose: a model
-- (its centroids fix it), a pinned split_seed, a head split, or the options
-- only the one-split path runs (online refits, closed-loop concurrency).
local function redraws_split(opts)
  return (opts.seeds or 1) > 1 and not opts.model and opts.split_seed == nil
    and opts.split ~= "head" and opts.calib_split ~= 0 and not opts.online
    and opts.concurrency == nil and opts.refit_every == nil and opts.refit_window == nil
end

-- The sweep on the core grid with a split per seed (eldr.advise's engine:
-- each seed draws its split, fits every K on its calibration rows and
-- simulates its held-out rows); its rows as the one-split path gives them.
local function sweep_resplit(trace, opts, ks, taus, rates, baselines)
  local o = {workers = ks, tau = taus, seeds = opts.seeds, seed = opts.seed,
             split = opts.split, calib_split = opts.calib_split, variant = opts.variant,
             layers = opts.layers, baselines = baselines, progress = opts.progress,
             cost_rule = opts.cost_rule, compare_fleets = #ks > 1}
  for _, k in ipairs({"output_tokens", "max_batch", "cost", "sample_pool", "min2"}) do
    o[k] = opts[k]
  end
  if rates[1] then o.rate = rates end
  local ok, g = pcall(eldr.advise, trace, o)
  if not ok then error((tostring(g):gsub("^eldr%.advise:", "eldr.sweep:")), 3) end
  local rows = {}
  for _, r in ipairs(g.grid) do
    local row = {}
    for _, k in ipairs(ROW_KEYS) do row[k] = r[k] end
    row.K = r.K
    row.rate = rates[1] and r.rate or "trace"
    rows[#rows + 1] = row
  end
  return rows, {split = g.split, seeds = g.seeds, calib_rows = g.calib_rows,
                eval_rows = g.eval_rows, ci_covers = g.ci_covers,
                split_redrawn = g.split_redrawn, verdicts = g.verdicts}
end

-- Why the one-split path kept its split, for ci_covers.
local function fixed_why(opts)
  if opts.model then return "the model is given: its centroids fix the calibration" end
  if opts.split_seed ~= nil then return "pinned by split_seed" end
  if opts.split == "head" then return "a head split" end
  return "online refits and concurrency run on one split"
end

--- experiments.sweep(trace, {model, tau, workers, rate, split, split_seed,
--- calib_split, seeds, progress, variant, layers, baselines, seed, online,
--- cost_rule, ...}) ->
--- rows {K, rate, policy, tau, tpot_p50_ms, tpot_p99_ms, distinct_per_step,
--- imbalance, vs_best_pct, ...; with seeds > 1 also seeds,
--- tpot_p50_ms_ci95, vs_best_pct_ci95, tpot_p50_ms_per_seed}, info {split,
--- seeds, calib_rows, eval_rows}
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
  local seed = opts.seed or 1
  -- the bindings' one coercion rule (docs/lua-api.md, "Arguments")
  if opts.seeds ~= nil then eldr.check(opts.seeds, "integer", fn, "seeds", 1) end
  if opts.cost_rule ~= nil then eldr.check(opts.cost_rule, "boolean", fn, "cost_rule") end
  if opts.progress ~= nil and type(opts.progress) ~= "function" then
    error("eldr.sweep: bad argument 'progress' (function(done, total) expected)", 2)
  end
  if redraws_split(opts) then return sweep_resplit(trace, opts, ks, taus, rates, baselines) end
  local calib, eval, split = split_of(trace, opts, fn)
  if #calib == 0 then
    error("eldr.sweep: bad argument 'calib_split' (0 leaves no calibration rows)", 2)
  end
  local policies = {}
  for _, b in ipairs(baselines) do
    if b == "eldr" or b == "eldr-online" or b == "eldr-cost" then
      error("eldr.sweep: bad argument 'baselines' (" .. b .. " is not a baseline; eldr-online "
            .. "is online = true, eldr-cost is cost_rule = true)", 2)
    end
    policies[#policies + 1] = b
  end
  policies[#policies + 1] = "eldr"
  if opts.online then policies[#policies + 1] = "eldr-online" end
  if opts.cost_rule then policies[#policies + 1] = "eldr-cost" end
  -- one recipe for every K: the model's, or fitted once on calib
  local recipe = model and model:recipe() or eldr.recipe(calib, {
    variant = opts.variant or "count_idf", layers = opts.layers or "auto", seed = seed})
  local rows = {}
  local cells, done = #ks * #rates, 0
  for _, K in ipairs(ks) do
    local m = fit_k(recipe, calib, K, seed, info and info.tau)
    for _, rate in ipairs(rates) do
      local res = eldr.simulate(eval, sim_opts(opts, {calib = calib, model = m,
        policy = policies, tau = taus, rate = rate or nil, seed = seed, seeds = opts.seeds}))
      rows_of(res, {K = K, rate = rate or "trace"}, rows)
      done = done + 1
      if opts.progress then opts.progress(done, cells) end
    end
  end
  -- one split for the whole grid (each K is fitted once on it): kept on
  -- purpose (redraws_split says when); its intervals cover arrivals only
  local n = opts.seeds or 1
  local covers = n < 2 and string.format("one seed (%d): no interval", seed)
    or string.format("95%% CI over %d arrival seeds (%d-%d); one %s split (%s): the split's "
                     .. "own variation is not in it", n, seed, seed + n - 1, split.mode,
                     fixed_why(opts))
  return rows, {split = split, seeds = n, calib_rows = #calib, eval_rows = #eval,
                ci_covers = covers, split_redrawn = false}
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
