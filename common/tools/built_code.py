"""built_code.py — the code of a lesson that the course's build compiles and its programs can reach.

coverage.py counts a call only where a learner's `make run-NN` could execute it. From a lesson's
sources this module keeps:
  - only the files the Makefile compiles (each program's .cpp and its _SOURCES from lesson.mk, or
    every top-level .cpp/.cu when the lesson has one program; standalone/*.cpp), and the headers
    they include, followed through `#include "..."`;
  - only the preprocessor branches the course's build takes: CUDA_VERSION is the cuda.h in use;
    the platform is x86-64 Linux; `__has_include` finds every optional package the course can
    install (EGL, OpenGL, Vulkan, nvJitLink) but not the Jetson-only <cudla.h>; `-D` flags of
    lesson.mk are defined; any other name is 0, as in the compiler. Branches decided by
    `__has_include` of a header the x86-64 build lacks are reported, so a note can say why;
  - only the functions reachable from a program's `main` (a function is reached when reached code
    names it; a class's constructors and destructor when the class is named), and function-like
    macros only when reached code uses them;
  - no statement under `if (false)` / `if (0)`.
What is dropped is blanked (its newlines kept), so line numbers stay those of the source.
"""
import pathlib
import re

ABSENT_ON_X86 = {"cudla.h"}  # Jetson-only headers: their branches are not built on x86-64
PREDEFINED = {"__linux__": 1, "__x86_64__": 1, "__cplusplus": 202002, "__GNUC__": 13}
KEYWORDS = {"if", "for", "while", "switch", "catch", "return", "sizeof", "defined", "alignof", "decltype",
            "static_assert", "noexcept", "__attribute__", "alignas", "requires"}
DIRECTIVE = re.compile(r"\s*#\s*(\w+)\b(.*)")


def _blank(text):
    return re.sub(r"[^\n]", " ", text)


def lesson_settings(root, lesson):
    """The lesson's lesson.mk without comments, continued lines joined."""
    mk = pathlib.Path(root) / lesson / "lesson.mk"
    text = mk.read_text() if mk.is_file() else ""
    text = re.sub(r"\\\n", " ", text)
    return "\n".join(line.split("#", 1)[0] for line in text.split("\n"))


def lesson_programs(root, lesson):
    """program -> its sources (PROGRAM.cpp and the _SOURCES of lesson.mk) for a lesson of several
    programs (NN-topic_PROGRAMS), or None for a lesson of one program."""
    folder = pathlib.Path(root) / lesson
    settings = lesson_settings(root, lesson)
    programs = re.search(rf"^{re.escape(lesson)}_PROGRAMS\s*:=\s*(.*)$", settings, re.M)
    if not programs:
        return None
    found = {}
    for program in programs.group(1).split():
        extra = re.search(rf"^{re.escape(lesson)}_{re.escape(program)}_SOURCES\s*:=\s*(.*)$", settings, re.M)
        found[program] = [folder / f"{program}.cpp"] + [folder / name for name in (extra.group(1).split() if extra else [])]
    return found


def compiled_files(root, lesson):
    """The lesson's source files the Makefile compiles into its programs."""
    folder = pathlib.Path(root) / lesson
    programs = lesson_programs(root, lesson)
    files = []
    if programs is not None:
        for sources in programs.values():
            files += sources
    else:
        files += sorted(folder.glob("*.cpp")) + sorted(folder.glob("*.cu"))
    files += sorted((folder / "standalone").glob("*.cpp"))
    seen, result = set(), []
    for f in files:
        if f.is_file() and f not in seen:
            seen.add(f)
            result.append(f)
    return result


def defined_flags(root, lesson):
    text = lesson_settings(root, lesson)
    flags = {}
    for name, value in re.findall(r"-D([A-Za-z_]\w*)(?:=([^\s)]+))?", text):
        flags[name] = int(value) if value and value.isdigit() else 1
    return flags


def _evaluate(condition, macros, absent):
    """The value of an #if condition, or None when it cannot be read."""
    condition = re.sub(r"//.*|/\*.*?\*/", "", condition)

    def has_include(m):
        name = m.group(1).strip("<>\" ")
        if name in ABSENT_ON_X86:
            absent.add(name)
            return " 0 "
        return " 1 "

    text = re.sub(r"__has_include\s*\(\s*([<\"][^>\"]+[>\"])\s*\)", has_include, condition)
    text = re.sub(r"defined\s*\(\s*(\w+)\s*\)|defined\s+(\w+)",
                  lambda m: " 1 " if (m.group(1) or m.group(2)) in macros else " 0 ", text)

    def expand(text, depth):
        def name(m):
            value = macros.get(m.group(0), 0)
            if isinstance(value, int):
                return f" {value} "
            if isinstance(value, str) and depth < 8:  # an object-like macro that is an expression
                return f" ({expand(value, depth + 1)}) "
            return " 0 "
        return re.sub(r"\b[A-Za-z_]\w*\b", name, text)

    text = expand(text, 0)
    text = re.sub(r"(\d+)[uUlL]+\b", r"\1", text)
    text = text.replace("&&", " and ").replace("||", " or ")
    text = re.sub(r"!(?!=)", " not ", text)
    try:
        return bool(eval(text, {"__builtins__": {}}, {}))  # digits and operators only, by now
    except Exception:
        return None


def _preprocess(path, macros, active, absent, unknown, visiting):
    """Walks one file as the preprocessor would, marking its active lines in active[path]."""
    if path in visiting:
        return
    visiting.add(path)
    lines = path.read_text(errors="replace").split("\n")
    marks = active.setdefault(path, set())
    stack = []  # (parent active, this branch active, a branch was taken)
    i = 0
    while i < len(lines):
        line = lines[i]
        number = i
        while line.endswith("\\") and i + 1 < len(lines):  # a directive continued on the next line
            i += 1
            line = line[:-1] + " " + lines[i]
        i += 1
        on = stack[-1][1] if stack else True
        d = DIRECTIVE.match(line)
        if not d:
            if on:
                marks.add(number)
            continue
        kind, rest = d.group(1), d.group(2)
        if kind in ("if", "ifdef", "ifndef"):
            if kind == "if":
                value = _evaluate(rest, macros, absent)
                if value is None:
                    unknown.add(f"{path.name}:{number + 1}: #if{rest}")
                    value = True
            else:
                value = (rest.split()[0] in macros) == (kind == "ifdef") if rest.split() else True
            stack.append((on, on and value, value))
        elif kind == "elif" and stack:
            parent, _, taken = stack[-1]
            value = _evaluate(rest, macros, absent)
            if value is None:
                unknown.add(f"{path.name}:{number + 1}: #elif{rest}")
                value = True
            stack[-1] = (parent, parent and not taken and value, taken or value)
        elif kind == "else" and stack:
            parent, _, taken = stack[-1]
            stack[-1] = (parent, parent and not taken, True)
        elif kind == "endif" and stack:
            stack.pop()
        elif not on:
            continue
        elif kind == "define":
            m = re.match(r"\s*(\w+)(\()?\s*(.*)", rest)
            if m:
                value = m.group(3).strip()
                macros[m.group(1)] = ("function", number) if m.group(2) else (int(value) if value.isdigit() else value or 1)
                if m.group(2):  # a function-like macro's body: kept only where reached code uses it
                    for k in range(number, i):
                        marks.add(k)
        elif kind == "undef":
            macros.pop(rest.strip(), None)
        elif kind == "include":
            m = re.match(r'\s*"([^"]+)"', rest)
            if m:
                target = (path.parent / m.group(1)).resolve()
                if target.is_file():
                    _preprocess(target, macros, active, absent, unknown, visiting)
    visiting.discard(path)


def closing(code, at, opening, close):
    """The index of the bracket that closes the one at `at`, or -1."""
    depth = 0
    for j in range(at, len(code)):
        depth += (code[j] == opening) - (code[j] == close)
        if depth == 0:
            return j
    return -1


# What may stand between a function's parameter list and its body: qualifiers, a trailing return
# type, a constructor's initialiser list.
BETWEEN = re.compile(r"\s*(?:(?:const|noexcept|override|final|mutable)\b\s*)*(?:->\s*[\w:<>,\s*&]+)?"
                     r"(?::\s*[\w:]+\s*[({][^;{}]*[)}]\s*(?:,\s*[\w:]+\s*[({][^;{}]*[)}]\s*)*)?\{")


def functions(code):
    """(name, start of the body, end of the body) of each function defined at namespace or class level."""
    found, taken_until = [], 0
    for m in re.finditer(r"(~?[A-Za-z_]\w*)\s*\(", code):
        if m.start() < taken_until or m.group(1) in KEYWORDS:
            continue
        close = closing(code, m.end() - 1, "(", ")")
        if close < 0:
            continue
        after = BETWEEN.match(code, close + 1)
        if not after:
            continue
        before = code[:m.start()].rstrip()
        if before.endswith("]") or before.endswith("=") or before.endswith("return") or before.endswith(","):
            continue  # a lambda or an initialiser, not a definition
        body = after.end() - 1
        end = closing(code, body, "{", "}")
        end = len(code) - 1 if end < 0 else end
        taken_until = end
        found.append((m.group(1), body + 1, end, m.start()))
    return found


def _false_branches(code):
    """The code with the statement or block under `if (false)` / `if (0)` blanked."""
    out = code
    for m in re.finditer(r"\bif\s*(?:constexpr\s*)?\(\s*(?:false|0)\s*\)\s*", code):
        start = m.end()
        if start < len(code) and code[start] == "{":
            j = closing(code, start, "{", "}")
        else:
            j = code.find(";", start)
        j = len(code) - 1 if j < 0 else j
        out = out[:m.start()] + _blank(out[m.start():j + 1]) + out[j + 1:]
    return out


def built_code(root, lesson, strip, version):
    """{path: code} for the lesson's built and reachable code (comments and strings removed by strip),
    and the notes: '#if' conditions that could not be read, headers absent on x86-64 that decided a branch."""
    macros = dict(PREDEFINED, CUDA_VERSION=version, CUDART_VERSION=version)
    macros.update(defined_flags(root, lesson))
    active, absent, unknown = {}, set(), set()
    folder = pathlib.Path(root, lesson).resolve()
    for unit in compiled_files(root, lesson):
        _preprocess(unit.resolve(), dict(macros), active, absent, unknown, set())
    # Keep only this lesson's own files: common/ is credited through its course:: helpers.
    code = {}
    for path, marks in active.items():
        if folder not in path.parents:
            continue
        stripped = strip(path.read_text(errors="replace")).split("\n")
        kept = [line if n in marks and not DIRECTIVE.match(line) else "" for n, line in enumerate(stripped)]
        # A function-like macro's body stays (its name is the macro's, for reachability).
        raw = path.read_text(errors="replace").split("\n")
        for n, line in enumerate(raw):
            if n in marks and re.match(r"\s*#\s*define\s+\w+\(", line):
                kept[n] = stripped[n].replace("#", " ", 1)
        code[path] = _false_branches("\n".join(kept))
    # Reachability over the whole lesson: roots are main and the code outside any function.
    bodies, outside = {}, []
    for path, text in code.items():
        spans = functions(text)
        last = 0
        for name, start, end, signature in spans:
            short = name.split("::")[-1]
            bodies.setdefault(short, []).append((path, start, end))
            outside.append(text[last:signature])  # a definition's own name does not reach it
            last = end
        outside.append(text[last:])
        for m in re.finditer(r"define\s+(\w+)\(", text):
            line_end = text.find("\n", m.end())
            bodies.setdefault(m.group(1), []).append((path, m.end(), len(text) if line_end < 0 else line_end))
    # A macro's definition does not reach the macro either.
    outside = [re.sub(r"define\s+\w+\([^\n]*", " ", piece) for piece in outside]
    names = lambda text: set(re.findall(r"~?\b[A-Za-z_]\w*", text))
    reached, todo = set(), ["main"] + sorted(names("\n".join(outside)) & set(bodies))
    while todo:
        name = todo.pop()
        if name in reached or name not in bodies:
            continue
        reached.add(name)
        for path, start, end in bodies[name]:
            for other in names(code[path][start:end]):
                for candidate in (other, "~" + other):
                    if candidate in bodies and candidate not in reached:
                        todo.append(candidate)
    for name, places in bodies.items():
        if name in reached or name.startswith("operator"):
            continue
        for path, start, end in places:
            text = code[path]
            code[path] = text[:start] + _blank(text[start:end]) + text[end:]
    return code, sorted(unknown), sorted(absent)


def pointer_calls(code, header_fold, variables_of=None):
    """Functions called through a cudaTypedefs.h pointer: a variable declared with PFN_cu… (or an alias of
    it) that the code calls, or a PFN_cu… cast called at once. variables_of, when given, gets for each
    such function the names of its pointer variables."""
    credited = set()
    types = {}
    for alias, typedef in re.findall(r"\busing\s+(\w+)\s*=\s*(PFN_cu\w+)", code):
        types[alias] = typedef
    for typedef, alias in re.findall(r"\btypedef\s+(PFN_cu\w+)\s+(\w+)\s*;", code):
        types[alias] = typedef
    for typedef in set(re.findall(r"\bPFN_cu\w+", code)):
        types[typedef] = typedef
    for spelled, typedef in types.items():
        function = header_fold(re.sub(r"^PFN_(cu[A-Z][A-Za-z0-9]*?)(_v\d+)?(_ptsz|_ptds)?$", r"\1", typedef))
        variables = set(re.findall(rf"\b(\w+)\s*=\s*[^;]*\b{spelled}\b", code))
        variables |= set(re.findall(rf"\b{spelled}\b\s*\*?\s*(\w+)\s*[;=,){{]", code))
        variables.discard(spelled)
        called = any(re.search(rf"(?<![\w]){re.escape(v)}\s*\(", code) for v in variables)
        called = called or re.search(rf"cast<\s*{spelled}\s*>\s*\([^;]*?\)\s*\(", code)
        if called:
            credited.add((function, re.sub(r"_v[0-9]+.*", "", typedef)))
            if variables_of is not None:
                variables_of.setdefault(function, set()).update(variables)
    return credited
