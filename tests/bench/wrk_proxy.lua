-- tests/bench/wrk_proxy.lua - wrk script for tests/bench/proxy.sh:
-- non-streaming completions (a 64-token prompt) through eldrd --proxy.
-- done() writes TSV rows (what, size, seconds, rate) to $WRK_ROWS.

dofile(os.getenv("ROOT") .. "/tests/bench/wrk_rows.lua")

local threads = {}

function setup(thread)
  threads[#threads + 1] = thread
end

function init(args)
  ok_n, failures = 0, 0
  local words = {}
  for i = 1, 64 do words[i] = "tok" .. i end
  body = '{"prompt":"' .. table.concat(words, " ") .. '","max_tokens":8}'
  headers = {["Content-Type"] = "application/json"}
end

function request()
  return wrk.format("POST", "/v1/completions", headers, body)
end

function response(status, hdrs, b)
  if status == 200 then ok_n = ok_n + 1 else failures = failures + 1 end
end

function done(summary, latency, requests)
  wrk_write_rows(summary, latency,
                 os.getenv("WRK_LABEL") or "eldrd --proxy completions, instant upstreams",
                 wrk_sum(threads, "ok_n"), "requests/s", wrk_sum(threads, "failures"))
end
