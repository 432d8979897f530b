-- luacheck configuration (run from the repository root).
std = "lua54"
max_line_length = 120
codes = true

-- deliberately broken tool files used by the sandbox specs
exclude_files = { "tests/spec/fixtures/**" }

files["tests/spec/**/*.lua"] = {
    std = "+busted",
}
files["tests/kit/**/spec/*.lua"] = {
    std = "+busted",
}
