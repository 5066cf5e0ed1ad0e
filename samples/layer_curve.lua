-- samples/layer_curve.lua - the paper's Figure 8: cumulative rho against
-- the number of layers kept by the greedy selection, as a table and a text
-- plot with N* marked.
--   eldr run samples/layer_curve.lua [trace.h5 [variant]]
local path = arg[1] or "../shared/data/gptoss20b-routing.h5"
local variant = arg[2] or "count_idf"
local t = eldr.load(path)
local curve, n_star, order = eldr.rho_curve(t, {variant = variant})
print(string.format("%s, %s: greedy layer selection, N* = %d\n", path, variant, n_star))
local lo, hi = math.huge, -math.huge
for _, r in ipairs(curve) do lo, hi = math.min(lo, r), math.max(hi, r) end
local width = 40
for s, r in ipairs(curve) do
  local bar = math.floor((r - lo) / math.max(hi - lo, 1e-9) * width + 0.5)
  print(string.format("%3d  +layer %-3d  %.4f  %s%s", s, order[s], r, string.rep("#", bar),
                      s == n_star and "  <- N*" or ""))
end
