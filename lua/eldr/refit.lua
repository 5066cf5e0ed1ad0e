-- eldr.refit - drift adaptation on a live eldrd (the part the paper leaves
-- to future work): cluster the router's recent signatures (GET /v1/window)
-- into K new centroids, match them to the current workers with the
-- Hungarian method on the K x K cosine distances (so worker i keeps the
-- traffic most like what it served), and push the aligned model
-- (PUT /v1/model). The recipe (variant, layer mask, idf) stays the
-- current model's: the window's signatures were built with it.
--
--   local refit = require "eldr.refit"
--   local r = eldr.attach("http://127.0.0.1:8470")
--   local model, report = refit.run(r, {min_rows = 64})
local eldr = require "eldr"

local M = {}

local function dot(a, b)
  local s = 0
  for i = 1, #a do s = s + a[i] * b[i] end
  return s
end

--- refit.align(old, new) -> perm, cost: old and new are K x d Signatures
--- (unit rows); perm[i] is the row of new that worker i gets, minimising
--- the summed cosine distance cost.
function M.align(old, new)
  local K = old:dims()
  local K2 = new:dims()
  if K ~= K2 then
    error(string.format("eldr.refit.align: %d old centroids but %d new ones", K, K2), 2)
  end
  local cost = {}
  for i = 1, K do
    local o = old:row(i)
    cost[i] = {}
    for j = 1, K do cost[i][j] = 1 - dot(o, new:row(j)) end
  end
  return eldr.hungarian(cost)
end

--- refit.run(router [, {n, min_rows, seed, iters, balanced, push}]) ->
--- Model, report: fit on the window, align, push (unless push = false).
--- report: {rows, perm, cost, objective, window_generation, pushed}.
function M.run(router, opts)
  opts = opts or {}
  local known = {n = true, min_rows = true, seed = true, iters = true, balanced = true,
                 push = true}
  for k in pairs(opts) do
    if not known[k] then error("eldr.refit.run: unknown option '" .. tostring(k) .. "'", 2) end
  end
  local cur = router:model()
  local info = cur:info()
  local K = #cur:workers()
  local win = router:window(opts.n)
  local rows = win.sigs and win.sigs:dims() or 0
  local need = opts.min_rows or 2 * K
  if rows < need then
    error(string.format("eldr.refit.run: %d signatures in the window, need at least %d",
                        rows, need), 2)
  end
  local km = eldr.kmeans(win.sigs, {k = K, seed = opts.seed or 1, iters = opts.iters or 50,
                                    balanced = opts.balanced ~= false})
  local perm, cost = M.align(cur:centroids(), km.centroids)
  local aligned = {}
  for i = 1, K do aligned[i] = km.centroids:row(perm[i]) end
  -- calibration: the window it was fitted on gives the model its own
  -- drift baseline (the share of those signatures nearest each centroid),
  -- so eldrd's drift view compares against what this refit saw
  local model = eldr.model(cur:recipe(), eldr.matrix(aligned),
                           {top_k = info.k, tau = info.tau, workers = cur:workers(),
                            calibration = win.sigs})
  local report = {rows = rows, perm = perm, cost = cost, objective = km.objective,
                  window_generation = win.model_generation}
  if opts.push ~= false then report.pushed = router:push(model) end
  return model, report
end

M._help = {
  ["eldr.refit.align"] = "refit.align(old, new) -> perm, cost: Hungarian match of new centroids "
                         .. "to the current workers (K x K cosine distance)",
  ["eldr.refit.run"] = "refit.run(router [, {n, min_rows, seed, iters, balanced, push}]) -> "
                       .. "Model, report: fit on the window, align, push",
}

return M
