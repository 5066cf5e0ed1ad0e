-- samples/transform_comparison.lua - the paper's Figure 7 on one trace:
-- signature quality rho of every variant, with all layers and after the
-- greedy layer selection, best first.
--   eldr run samples/transform_comparison.lua [trace.h5]
local path = arg[1] or "../shared/data/gptoss20b-routing.h5"
local t = eldr.load(path)
print(string.format("%s: %d requests, signature quality rho (30000 pairs, seed 1)\n", path, #t))
local rows = {}
for _, v in ipairs(eldr.rho_variants(t)) do
  rows[#rows + 1] = {
    variant = v.variant,
    rho_all = v.rho_all,
    rho = v.rho,
    n_star = v.n_star,
    mask = v.available and table.concat(v.mask, ",") or v.reason,
  }
end
eldr.report.print(rows, {"variant", {key = "rho_all", title = "rho (all layers)", fmt = "%.4f"},
                         {key = "rho", title = "rho (greedy)", fmt = "%.4f"},
                         {key = "n_star", title = "N*"}, {key = "mask", title = "layers kept"}})
