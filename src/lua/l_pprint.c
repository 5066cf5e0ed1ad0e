/* l_pprint.c - eldr.pp: pretty-print any Lua value to a string, with
 * limits on depth and width, for the REPL and for scripts. Written in Lua
 * (a chunk compiled at module load) because it walks Lua tables and calls
 * __tostring, which may raise: in Lua an error there cannot leak C memory.
 *
 * Rules: strings quoted (%q); integers and floats as Lua prints them;
 * userdata and tables with __tostring through it; a table prints its
 * sequence part in order, then the other keys sorted (numbers, then
 * strings, then the rest by their text); identifier keys bare, others in
 * brackets; at most `width` entries per table ("... N more"), `depth`
 * levels ("{...}" below), cycles as "<cycle>"; one line when the result
 * fits in 78 columns, else short scalars packed several to a line and
 * other entries one per line, indented.
 *
 * What to see (issue 22): `keys = {"vs_best", "ci"}` puts those fields
 * first, in that order, in every table that has them, so the width limit
 * cuts the others, not them; `all = true` lifts both limits. The "... N
 * more" marker names the fields it hides, so a user knows what to ask
 * for. */
#include "l_types.h"
#include "l_util.h"

static const char PP_SRC[] =
    "local depth_max, width_max = ...\n"
    "local fmt, concat, sort, rep = string.format, table.concat, table.sort, string.rep\n"
    "local function keyorder(a, b)\n"
    "  local ta, tb = type(a), type(b)\n"
    "  if ta ~= tb then\n"
    "    if ta == 'number' then return true elseif tb == 'number' then return false end\n"
    "    if ta == 'string' then return true elseif tb == 'string' then return false end\n"
    "    return ta < tb\n"
    "  end\n"
    "  if ta == 'number' or ta == 'string' then return a < b end\n"
    "  return tostring(a) < tostring(b)\n"
    "end\n"
    "local function scalar(v)\n"
    "  local t = type(v)\n"
    "  if t == 'string' then return (fmt('%q', v):gsub('\\\\\\n', '\\\\n')) end\n"
    "  if t == 'table' or t == 'userdata' then\n"
    "    local mt = getmetatable(v)\n"
    "    if type(mt) == 'table' and rawget(mt, '__tostring') then return tostring(v) end\n"
    "  end\n"
    "  if t ~= 'table' then return tostring(v) end\n"
    "end\n"
    "local render\n"
    "-- the keys of v past its sequence: the asked-for ones first, in their\n"
    "-- order, then the rest sorted\n"
    "local function ordered_keys(v, n, first)\n"
    "  local keys, rest, ahead = {}, {}, {}\n"
    "  for _, k in ipairs(first) do\n"
    "    if rawget(v, k) ~= nil and not ahead[k] then keys[#keys + 1] = k ahead[k] = true end\n"
    "  end\n"
    "  for k in pairs(v) do\n"
    "    if not ahead[k] and not (math.type(k) == 'integer' and k >= 1 and k <= n) then\n"
    "      rest[#rest + 1] = k\n"
    "    end\n"
    "  end\n"
    "  sort(rest, keyorder)\n"
    "  for _, k in ipairs(rest) do keys[#keys + 1] = k end\n"
    "  return keys\n"
    "end\n"
    "-- '... 3 more: ci, rows, seeds': what the width limit hid, by name\n"
    "local function more(keys, from, hidden)\n"
    "  local names = {}\n"
    "  for i = from, #keys do\n"
    "    if type(keys[i]) == 'string' then names[#names + 1] = keys[i] end\n"
    "  end\n"
    "  local s = fmt('... %d more', hidden)\n"
    "  if #names == 0 then return s end\n"
    "  local list = concat(names, ', ')\n"
    "  if #list > 48 then list = list:sub(1, 45) .. '...' end\n"
    "  return s .. ': ' .. list\n"
    "end\n"
    "render = function(v, depth, seen, indent, dmax, wmax, first)\n"
    "  local s = scalar(v)\n"
    "  if s then return s end\n"
    "  if seen[v] then return '<cycle>' end\n"
    "  if depth >= dmax then return next(v) == nil and '{}' or '{...}' end\n"
    "  seen[v] = true\n"
    "  local items, n, count = {}, #v, 0\n"
    "  local keys = ordered_keys(v, n, first)\n"
    "  local total = n + #keys\n"
    "  local inner = indent .. '  '\n"
    "  for i = 1, n do\n"
    "    if count >= wmax then break end\n"
    "    count = count + 1\n"
    "    items[count] = render(v[i], depth + 1, seen, inner, dmax, wmax, first)\n"
    "  end\n"
    "  local shown = 0\n"
    "  for _, k in ipairs(keys) do\n"
    "    if count >= wmax then break end\n"
    "    count = count + 1\n"
    "    shown = shown + 1\n"
    "    local ks = type(k) == 'string' and k:match('^[%a_][%w_]*$') and k\n"
    "               or '[' .. render(k, dmax, seen, inner, dmax, wmax, first) .. ']'\n"
    "    items[count] = ks .. ' = ' .. render(v[k], depth + 1, seen, inner, dmax, wmax, first)\n"
    "  end\n"
    "  seen[v] = nil\n"
    "  if total > count then items[count + 1] = more(keys, shown + 1, total - count) end\n"
    "  if #items == 0 then return '{}' end\n"
    "  local one = '{' .. concat(items, ', ') .. '}'\n"
    "  if #one + #indent <= 78 and not one:find('\\n') then return one end\n"
    "  local packed, short = {}, true\n"
    "  for _, it in ipairs(items) do\n"
    "    if #it > 24 or it:find('[\\n{]') then short = false break end\n"
    "  end\n"
    "  if short then\n"
    "    local line = ''\n"
    "    for i, it in ipairs(items) do\n"
    "      local piece = it .. (i < #items and ',' or '')\n"
    "      if #line > 0 and #line + 1 + #piece + #inner > 78 then\n"
    "        packed[#packed + 1] = line\n"
    "        line = piece\n"
    "      else\n"
    "        line = #line > 0 and line .. ' ' .. piece or piece\n"
    "      end\n"
    "    end\n"
    "    packed[#packed + 1] = line\n"
    "    return '{\\n' .. inner .. concat(packed, '\\n' .. inner) .. '\\n' .. indent .. '}'\n"
    "  end\n"
    "  return '{\\n' .. inner .. concat(items, ',\\n' .. inner) .. '\\n' .. indent .. '}'\n"
    "end\n"
    "local known = {depth = true, width = true, keys = true, all = true}\n"
    "return function(v, opts)\n"
    "  local d, w, first = depth_max, width_max, {}\n"
    "  if opts ~= nil then\n"
    "    if type(opts) ~= 'table' then\n"
    "      error(\"eldr.pp: bad argument 'options' (table expected, got \" .. type(opts) .. ')', 2)\n"
    "    end\n"
    "    for k in pairs(opts) do\n"
    "      if not known[k] then\n"
    "        error(\"eldr.pp: unknown option '\" .. tostring(k) .. \"' (known: depth, width, keys, all)\", 2)\n"
    "      end\n"
    "    end\n"
    "    if opts.keys ~= nil then\n"
    "      if type(opts.keys) ~= 'table' then\n"
    "        error(\"eldr.pp: bad argument 'keys' (a list of field names expected, got \" .. type(opts.keys) .. ')', 2)\n"
    "      end\n"
    "      first = opts.keys\n"
    "    end\n"
    "    if opts.all ~= nil and type(opts.all) ~= 'boolean' then\n"
    "      error(\"eldr.pp: bad argument 'all' (boolean expected, got \" .. type(opts.all) .. ')', 2)\n"
    "    end\n"
    "    if opts.all then d, w = math.maxinteger, math.maxinteger end\n"
    "    d = opts.depth or d\n"
    "    w = opts.width or w\n"
    "    if math.type(d) ~= 'integer' or d < 0 then\n"
    "      error(\"eldr.pp: bad argument 'depth' (integer >= 0 expected)\", 2)\n"
    "    end\n"
    "    if math.type(w) ~= 'integer' or w < 1 then\n"
    "      error(\"eldr.pp: bad argument 'width' (integer >= 1 expected)\", 2)\n"
    "    end\n"
    "  end\n"
    "  return render(v, 0, {}, '', d, w, first)\n"
    "end\n";

#define PP_DEPTH 4
#define PP_WIDTH 24

void l_open_pprint(lua_State *L)
{
    if (luaL_loadbuffer(L, PP_SRC, sizeof PP_SRC - 1, "=eldr.pp") != LUA_OK)
        lua_error(L); /* a bug in the chunk above: fail loudly at startup */
    lua_pushinteger(L, PP_DEPTH);
    lua_pushinteger(L, PP_WIDTH);
    lua_call(L, 2, 1);
    lua_setfield(L, -2, "pp");
    l_sethelp(L, "eldr.pp", "eldr.pp(value [, {depth = 4, width = 24, keys = {names...}, all = "
                            "false}]) -> string: the value pretty-printed (what the REPL shows); "
                            "keys first, all = true: every field");
}

void l_pprint(lua_State *L, int idx, int depth, int width)
{
    idx = lua_absindex(L, idx);
    lua_getfield(L, LUA_REGISTRYINDEX, LUA_LOADED_TABLE);
    lua_getfield(L, -1, "eldr");
    lua_getfield(L, -1, "pp");
    lua_pushvalue(L, idx);
    lua_createtable(L, 0, 2);
    lua_pushinteger(L, depth);
    lua_setfield(L, -2, "depth");
    lua_pushinteger(L, width);
    lua_setfield(L, -2, "width");
    lua_call(L, 2, 1);
    lua_replace(L, -3);
    lua_pop(L, 1);
}
