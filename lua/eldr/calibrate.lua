-- eldr.calibrate - the paper's offline calibration in a few calls:
-- split the trace, fit IDF and the greedy layer mask on the calibration
-- rows, cluster their signatures with balanced spherical K-means, and
-- report how the centroids fit held-out rows.
--
-- calibrate.fit composes eldr.recipe, Recipe:signatures and eldr.kmeans
-- rather than calling eldr.fit, so that Ctrl-C interrupts a long fit in
-- the REPL (eldr.kmeans polls the cancel flag); with the same options it
-- gives the same centroids as eldr.fit (the tests check the objective).
local eldr = require "eldr"

local M = {}

local function opts_of(opts, fn, known)
  opts = opts or {}
  if type(opts) ~= "table" then
    error(string.format("eldr.calibrate.%s: bad argument 'options' (table expected, got %s)",
                        fn, type(opts)), 3)
  end
  for k in pairs(opts) do
    if not known[k] then
      local names = {}
      for n in pairs(known) do names[#names + 1] = n end
      table.sort(names)
      error(string.format("eldr.calibrate.%s: unknown option '%s' (known: %s)", fn,
                          tostring(k), table.concat(names, ", ")), 3)
    end
  end
  return opts
end

local function set(...)
  local s = {}
  for _, k in ipairs({...}) do s[k] = true end
  return s
end

--- calibrate.split(trace [, spec]) -> calib, eval. The simulator's split
--- (eldr.calib_split: a seeded random draw by default, so that a trace
--- sorted by label is not calibrated on one domain and evaluated on
--- another). spec: a number (a count capped at half, or a fraction), a
--- table {size, mode = 'random'|'head'|'stratified', seed} for
--- eldr.calib_split, or a table with count, fraction or time for
--- trace:split ({fraction = F, seed = S, mode = M}, ...). With
--- eldr.calib_split a third value says which split: {mode, seed,
--- calib_rows, eval_rows, text}.
function M.split(trace, spec)
  if type(spec) == "table" and (spec.count or spec.fraction or spec.time) then
    return trace:split(spec)
  end
  local calib, eval, info = eldr.calib_split(trace, spec)
  info.calib, info.eval = nil, nil
  return calib, eval, info
end

--- calibrate.idf(calib [, {variant}]) -> Recipe over all layers, IDF on calib.
function M.idf(calib, opts)
  opts = opts_of(opts, "idf", set("variant"))
  return eldr.recipe(calib, {variant = opts.variant or "count_idf", layers = "all"})
end

--- calibrate.mask(calib [, {variant, pairs, seed, progress}]) -> the greedy selection.
function M.mask(calib, opts)
  opts = opts_of(opts, "mask", set("variant", "pairs", "seed", "progress"))
  return eldr.select_layers(calib, opts)
end

--- calibrate.fit(calib, {k, variant, layers, seed, iters, balanced, pairs,
--- tau, workers, progress}) -> Model, report. progress(done, total, what)
--- sees the stages eldr.fit reports: "layer selection" (auto layers),
--- "signatures", "k-means" (rounds of iters).
function M.fit(calib, opts)
  opts = opts_of(opts, "fit", set("k", "variant", "layers", "seed", "iters", "balanced",
                                  "pairs", "tau", "workers", "progress"))
  local progress = opts.progress
  if progress ~= nil and type(progress) ~= "function" then
    error("eldr.calibrate.fit: bad argument 'progress' (a function(done, total, what) expected)", 2)
  end
  local t0 = os.clock()
  local seed = opts.seed or 1
  local recipe, selection = eldr.recipe(calib, {
    variant = opts.variant or "count_idf", layers = opts.layers or "auto",
    pairs = opts.pairs, seed = seed, progress = progress})
  local t1 = os.clock()
  if progress then progress(0, 1, "signatures") end
  local sigs = recipe:signatures(calib)
  if progress then progress(1, 1, "signatures") end
  -- all-zero signatures cannot be clustered: leave them out, as eldr.fit does
  local zero = sigs:zero_rows()
  local rows = {}
  if #zero > 0 then
    local is_zero = {}
    for _, r in ipairs(zero) do is_zero[r] = true end
    for r = 1, #sigs do if not is_zero[r] then rows[#rows + 1] = r end end
    sigs = sigs:sub(rows)
  else
    for r = 1, #sigs do rows[r] = r end
  end
  local iters = opts.iters or 50
  local km = eldr.kmeans(sigs, {k = opts.k, seed = seed, iters = opts.iters,
                                balanced = opts.balanced,
                                progress = progress and function(iter)
                                  progress(math.min(iter, iters), iters, "k-means")
                                end})
  if progress then progress(iters, iters, "k-means") end
  local t2 = os.clock()
  local _, _, k = calib:geometry()
  local model = eldr.model(recipe, km.centroids, {top_k = k, tau = opts.tau, seed = seed,
                                                   workers = opts.workers})
  local assignment = {}
  for r = 1, #calib do assignment[r] = 0 end
  for i, r in ipairs(rows) do assignment[r] = km.assignment[i] end
  local info = recipe:info()
  return model, {
    sizes = km.sizes, objective = km.objective, iterations = km.iterations,
    converged = km.converged, mask = info.layers, n_star = #info.layers,
    rho = selection and selection.rho, curve = selection and selection.curve,
    order = selection and selection.order, zero_rows = zero, assignment = assignment,
    seconds = {recipe = t1 - t0, fit = t2 - t1},
  }
end

--- calibrate.report(model, eval) -> how the centroids fit held-out rows:
--- rows, zero_rows, sizes of the nearest-centroid assignment, imbalance
--- (max / mean size), mean and min similarity to the nearest centroid.
function M.report(model, eval)
  local sigs = model:signatures(eval)
  local nearest, sims = model:nearest(sigs)
  local zero = {}
  for _, r in ipairs(sigs:zero_rows()) do zero[r] = true end
  local K = model:info().K
  local sizes = {}
  for c = 1, K do sizes[c] = 0 end
  local sum, min, n = 0, math.huge, 0
  for r = 1, #sigs do
    if not zero[r] then
      sizes[nearest[r]] = sizes[nearest[r]] + 1
      sum, n = sum + sims[r], n + 1
      if sims[r] < min then min = sims[r] end
    end
  end
  local max = 0
  for c = 1, K do if sizes[c] > max then max = sizes[c] end end
  return {
    rows = #sigs, zero_rows = #sigs - n, sizes = sizes,
    imbalance = n > 0 and max / (n / K) or nil,
    mean_sim = n > 0 and sum / n or nil, min_sim = n > 0 and min or nil,
  }
end

--- calibrate.run(trace, {k, split = 0.5, ...fit options}) -> {calib,
--- eval, split, model, fit, eval_report}: the whole pipeline (split: a
--- seeded random half by default; `split` says which unless trace:split
--- options were given).
function M.run(trace, opts)
  opts = opts_of(opts, "run", set("k", "split", "variant", "layers", "seed", "iters",
                                  "balanced", "pairs", "tau", "workers", "progress"))
  local calib, eval, split = M.split(trace, opts.split or 0.5)
  local fit_opts = {}
  for k, v in pairs(opts) do if k ~= "split" then fit_opts[k] = v end end
  local model, fit = M.fit(calib, fit_opts)
  return {calib = calib, eval = eval, split = split, model = model, fit = fit,
          eval_report = #eval > 0 and M.report(model, eval) or nil}
end

M._help = {
  ["eldr.calibrate.split"] = "eldr.calibrate.split(trace [, spec]) -> calib, eval: a seeded "
    .. "random split by default (eldr.calib_split size or {size, mode, seed}), or trace:split "
    .. "options",
  ["eldr.calibrate.idf"] = "eldr.calibrate.idf(calib [, {variant}]) -> Recipe: IDF on the "
    .. "calibration rows, all layers",
  ["eldr.calibrate.mask"] = "eldr.calibrate.mask(calib [, {variant, pairs, seed, progress}]) -> greedy "
    .. "layer selection {mask, n_star, rho, curve, order}",
  ["eldr.calibrate.fit"] = "eldr.calibrate.fit(calib, {k, variant, layers, seed, iters, "
    .. "balanced, pairs, tau, workers, progress}) -> Model, report (interruptible)",
  ["eldr.calibrate.report"] = "eldr.calibrate.report(model, eval) -> {rows, sizes, imbalance, "
    .. "mean_sim, min_sim}: the centroids on held-out rows",
  ["eldr.calibrate.run"] = "eldr.calibrate.run(trace, {k, split = 0.5, ...}) -> {calib, eval, "
    .. "model, fit, eval_report}: the whole pipeline",
}

return M
