-- tests/e2e/push.lua - run by tests/e2e/push.sh with `eldr run`:
--   push.lua ADMIN_URL TOKEN_FILE NEW_MODEL PERM
-- against an eldrd with --admin-listen and --admin-token-file serving a
-- K = 5 model that is a permutation-close relative of NEW_MODEL; PERM is
-- the brute force's matching (0-based, comma-separated).
local url, tok, path, perm_s = arg[1], arg[2], arg[3], arg[4]
local n_ok, n_bad = 0, 0
local function ok(cond, name, detail)
  if cond then n_ok = n_ok + 1; print("ok - push.lua: " .. name)
  else n_bad = n_bad + 1; print("not ok - push.lua: " .. name); if detail then print("#   " .. tostring(detail)) end end
end
local perm = {}
for x in perm_s:gmatch("%d+") do perm[#perm + 1] = tonumber(x) + 1 end
local m = eldr.load_model(path)

-- without the token: the plan works (GETs are open), the PUT is refused
local open = eldr.attach(url)
local gen0 = open:snapshot({decisions = 0}).model.generation
local dry = open:push(m, {dry_run = true})
local same = #dry.perm == 5
for i = 1, 5 do same = same and dry.perm[i] == perm[i] end
ok(same and dry.pushed == false, "dry_run: the brute force's matching, nothing pushed",
   table.concat(dry.perm, ","))
ok(dry.cos[1] <= 1 + 1e-6 and dry.align_cost <= dry.cost_as_given + 1e-6,
   "dry_run: the aligned cost is at most the file order's", dry.align_cost)
local okp, msg = pcall(open.push, open, m)
ok(not okp and tostring(msg):find("HTTP 401", 1, true), "push without the token raises eldrd's 401", msg)
ok(open:snapshot({decisions = 0}).model.generation == gen0, "... and nothing changed")

-- wrong arguments: a Lua error naming what is wrong
okp, msg = pcall(eldr.attach, url, {token_file = "/nonexistent/tok"})
ok(not okp and tostring(msg):find("token_file /nonexistent/tok", 1, true), "attach: a missing token file named", msg)
okp, msg = pcall(eldr.attach, url, {tokenfile = tok})
ok(not okp and tostring(msg):find("tokenfile", 1, true), "attach: an unknown option named", msg)
okp, msg = pcall(open.push, open, "not a model")
ok(not okp and tostring(msg):find("model", 1, true), "push: a string for the model is refused", msg)
okp, msg = pcall(open.push, open, m, {dryrun = true})
ok(not okp and tostring(msg):find("dryrun", 1, true), "push: an unknown option named", msg)

-- with the token: pushed, the live centroids in the matched order
local r = eldr.attach(url, {token_file = tok})
local a = r:push(m)
ok(a.pushed == true and a.model_generation == gen0 + 1 and a.K == 5, "push with the token",
   a.model_generation)
local live = r:model():centroids()
local new = m:centroids()
local worst = 0
for i = 1, 5 do
  local x, y = live:row(i), new:row(perm[i])
  for j = 1, #x do worst = math.max(worst, math.abs(x[j] - y[j])) end
end
ok(worst < 1e-6, "the served centroids are the new model's rows in the matched order", worst)
ok(r:set_tau(0.25) == 0.25, "the token goes with every admin call (set_tau)")

print(string.format("# push.lua: %d ok, %d not ok", n_ok, n_bad))
os.exit(n_bad == 0 and 0 or 1)
