"""submem's bridge to text environments: one JSON object a line on stdin, one
answer a line on stdout. Started by the Rust harness (submem-bench's
`agentic::bridge`), never imported.

Requests carry an "op" and an "id" the answer repeats:
  {"op": "hello"}                       -> which environments can be played here
  {"op": "make", "env": E, "spec": {..}}-> {"game": PATH}: generates (or finds in the cache) one game
  {"op": "reset", "env": E, "game": G}  -> the opening state
  {"op": "step", "command": C}          -> the state after C
  {"op": "close"}                       -> ends the process
A state is {"objective", "observation", "admissible", "score", "max_score",
"won", "lost", "done", "invalid", "walkthrough" (reset only)}. A failure is
{"ok": false, "error": "...", "kind": "..."}; the bridge keeps serving after
it. Nothing but answers is written to stdout: the environments' own chatter is
sent to stderr.
"""

import contextlib
import hashlib
import io
import json
import os
import random
import re
import subprocess
import sys
import time
import traceback

PROTOCOL = 1
CACHE = os.environ.get("SUBMEM_ENV_CACHE") or os.path.join(
    os.path.expanduser("~"), ".cache", "submem", "games")

# The answers go to the real stdout; everything printed by the libraries goes
# to stderr, so that it can never be read as an answer.
_OUT = sys.stdout
sys.stdout = sys.stderr


class Refused(Exception):
    """A request that cannot be served: a clear message, the bridge lives on."""

    def __init__(self, kind, message):
        super().__init__(message)
        self.kind = kind


def answer(obj):
    _OUT.write(json.dumps(obj) + "\n")
    _OUT.flush()


# --------------------------------------------------------------- TextWorld

BANNER = re.compile(r"^[\s\\|/_$-]*$")


def clean_feedback(text):
    """Drops TextWorld's ASCII-art banner and blank runs; keeps the prose."""
    lines = text.splitlines()
    # The banner is lines of `$`, `\`, `|`, `_`, `/` and spaces, followed by
    # a "-= Room =-" title; keep everything after the last banner line.
    last_banner = -1
    for i, line in enumerate(lines):
        if "$$" in line or (line.strip() and BANNER.match(line) and "_" in line):
            last_banner = i
    lines = lines[last_banner + 1:]
    # The interpreter's prompt (a lone ">") ends most answers.
    while lines and lines[-1].strip() in (">", ""):
        lines.pop()
    out, blank = [], False
    for line in lines:
        if line.strip():
            out.append(line.rstrip())
            blank = False
        elif not blank and out:
            out.append("")
            blank = True
    return "\n".join(out).strip()


TW_KINDS = {
    # spec key -> (tw-make challenge, {spec setting: tw-make flag})
    "cooking": ("tw-cooking", {"recipe": "--recipe", "take": "--take", "go": "--go",
                               "open": "--open", "cook": "--cook", "cut": "--cut"}),
    "custom": ("custom", {"rooms": "--world-size", "objects": "--nb-objects",
                          "quest": "--quest-length", "breadth": "--quest-breadth"}),
    "treasure": ("tw-treasure_hunter", {"level": "--level"}),
    "coin": ("tw-coin_collector", {"level": "--level"}),
    "simple": ("tw-simple", {"rewards": "--rewards", "goal": "--goal"}),
}
TW_FLAGS = {"open", "cook", "cut"}  # tw-cooking switches without a value


def tw_make(spec, timeout):
    kind = spec.get("kind")
    if kind not in TW_KINDS:
        raise Refused("spec", f"unknown TextWorld game kind {kind!r}; known: {', '.join(sorted(TW_KINDS))}")
    challenge, flags = TW_KINDS[kind]
    seed = int(spec.get("seed", 1))
    args = [challenge]
    for key, value in sorted(spec.items()):
        if key in ("kind", "seed"):
            continue
        if key not in flags:
            raise Refused("spec", f"TextWorld {kind} games take no setting {key!r}; known: {', '.join(sorted(flags))}")
        if key in TW_FLAGS:
            if str(value).lower() in ("1", "true", "yes"):
                args.append(flags[key])
        else:
            args += [flags[key], str(value)]
    args += ["--seed", str(seed)]
    name = hashlib.sha256(json.dumps([PROTOCOL] + args).encode()).hexdigest()[:16]
    folder = os.path.join(CACHE, "textworld")
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, f"{kind}-{seed}-{name}.z8")
    if os.path.exists(path):
        return path
    tw_make_bin = os.path.join(os.path.dirname(sys.executable), "tw-make")
    # Generated under a temporary name and moved: a killed generation leaves
    # no half-written game for the next run to load.
    tmp = os.path.join(folder, f".tmp-{os.getpid()}-{name}.z8")
    try:
        # Killed at the deadline (a bridge killed instead would leave it running).
        proc = subprocess.run([tw_make_bin] + args + ["--output", tmp, "-f", "--silent"],
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                              timeout=timeout)
    except subprocess.TimeoutExpired:
        raise Refused("timeout", f"tw-make {' '.join(args)} took longer than {timeout:.0f} s "
                                 "(large worlds take minutes: raise the make timeout)")
    if proc.returncode != 0 or not os.path.exists(tmp):
        raise Refused("spec", f"tw-make {' '.join(args)} failed: {proc.stdout.strip()[-500:]}")
    for ext in (".json", ".ni"):
        side = tmp[:-3] + ext
        if os.path.exists(side):
            os.replace(side, path[:-3] + ext)
    os.replace(tmp, path)
    return path


def check_story_file(path):
    """Refuses a .z8/.ulx file that is no story file: the interpreter would
    end the whole process on it ("Fatal error: Story file read error")."""
    if not path.endswith((".z8", ".z5", ".ulx")):
        return
    with open(path, "rb") as f:
        head = f.read(64)
    if path.endswith(".ulx"):
        ok = head[:4] == b"Glul"
    else:
        ok = len(head) == 64 and 1 <= head[0] <= 8
    if not ok:
        raise Refused("game", f"{path} is not a playable game: not a {'Glulx' if path.endswith('.ulx') else 'Z-machine'} story file")


class TextWorldGame:
    def __init__(self, path, wrappers=()):
        import textworld
        if not os.path.exists(path):
            raise Refused("game", f"no game file at {path}")
        check_story_file(path)
        infos = textworld.EnvInfos(objective=True, admissible_commands=True, max_score=True,
                                   score=True, won=True, lost=True, extras=["walkthrough"])
        try:
            self.env = textworld.start(path, request_infos=infos, wrappers=list(wrappers))
            self.state = self.env.reset()
        except Exception as e:  # a file that does not parse as a game
            raise Refused("game", f"{path} is not a playable game: {type(e).__name__}: {e}")
        self.done = False
        self.objective = ""

    def view(self, state, invalid=False):
        admissible = sorted(set(state.get("admissible_commands") or []))
        objective = state.get("objective") or ""
        return {
            "objective": objective.strip(),
            "observation": clean_feedback(state.get("feedback") or ""),
            "admissible": admissible,
            "score": float(state.get("score") or 0),
            "max_score": float(state.get("max_score") or 0),
            "won": bool(state.get("won")),
            "lost": bool(state.get("lost")),
            "done": self.done,
            "invalid": invalid,
        }

    def reset(self):
        out = self.view(self.state)
        self.objective = out["objective"]
        walkthrough = self.state.get("extra.walkthrough")
        out["walkthrough"] = list(walkthrough) if walkthrough else None
        return out

    def step(self, command):
        invalid = command not in (self.state.get("admissible_commands") or [])
        self.state, _, done = self.env.step(command)
        self.done = bool(done) or bool(self.state.get("won")) or bool(self.state.get("lost"))
        out = self.view(self.state, invalid)
        out["objective"] = out["objective"] or self.objective
        return out

    def close(self):
        with contextlib.suppress(Exception):
            self.env.close()


# ---------------------------------------------------------------- ALFWorld

def alfworld_data():
    import alfworld
    base = os.path.join(os.path.dirname(alfworld.__file__), "data")
    domain = os.path.join(base, "alfred.pddl")
    grammar = os.path.join(base, "alfred.twl2")
    if not (os.path.exists(domain) and os.path.exists(grammar)):
        raise Refused("missing", f"the alfworld package has no bundled domain at {base}")
    return open(domain).read(), open(grammar).read()


# Receptacles, objects and which receptacles hold which objects: a small,
# fixed slice of ALFRED's household types, enough for the six task families.
RECEPTACLES = ["Cabinet", "CounterTop", "Drawer", "Shelf", "DiningTable", "SideTable",
               "Dresser", "Desk", "Sofa", "Bed", "GarbageCan", "CoffeeTable", "Safe", "ArmChair"]
OPENABLE = {"Cabinet", "Drawer", "Fridge", "Microwave", "Safe"}
OBJECTS = {
    # object: (heatable, coolable, cleanable)
    "Apple": (True, True, True), "Potato": (True, True, True), "Tomato": (True, True, True),
    "Egg": (True, True, True), "Mug": (True, True, True), "Cup": (True, True, True),
    "Plate": (True, True, True), "Bread": (True, True, False), "Lettuce": (False, True, True),
    "Bowl": (False, True, True), "Spoon": (False, False, True), "Knife": (False, False, True),
    "Book": (False, False, False), "CellPhone": (False, False, False), "KeyChain": (False, False, False),
    "Pen": (False, False, False), "Vase": (False, False, False), "CreditCard": (False, False, False),
    "Pillow": (False, False, False), "RemoteControl": (False, False, False),
}
TASKS = {
    # task: (appliance receptacle, object property index, template)
    "pick": (None, None, "put a {obj} in {recep}"),
    "heat": ("Microwave", 0, "put a hot {obj} in {recep}"),
    "cool": ("Fridge", 1, "put a cool {obj} in {recep}"),
    "clean": ("SinkBasin", 2, "put a clean {obj} in {recep}"),
    "two": (None, None, "put two {obj} in {recep}"),
}


def mangle(name, i):
    """An ALFRED-style id (`Apple|+00.10|+00.90|-01.20`) in PDDL-safe form.
    A sink basin is `Sink|…|SinkBasin` in ALFRED, which ALFWorld's demangler
    names "sinkbasin 1"."""
    coords = f"|+0{i % 10}.{i * 7 % 100:02d}|+00.{i * 13 % 100:02d}|-0{i % 7}.{i * 3 % 100:02d}"
    text = ("Sink" + coords + "|SinkBasin") if name == "SinkBasin" else (name + coords)
    for a, b in (("|", "_bar_"), ("+", "_plus_"), ("-", "_minus_"), (".", "_dot_")):
        text = text.replace(a, b)
    return text


def alfworld_make(spec):
    task = spec.get("kind", "pick")
    if task not in TASKS:
        raise Refused("spec", f"unknown ALFWorld task {task!r}; known: {', '.join(sorted(TASKS))}")
    known = {"kind", "seed", "receptacles", "objects"}
    for key in spec:
        if key not in known:
            raise Refused("spec", f"ALFWorld games take no setting {key!r}; known: {', '.join(sorted(known - {'kind'}))}")
    seed = int(spec.get("seed", 1))
    n_recep = int(spec.get("receptacles", 6))
    n_obj = int(spec.get("objects", 6))
    if not 2 <= n_recep <= 40 or not 1 <= n_obj <= 60:
        raise Refused("spec", "ALFWorld games take 2-40 receptacles and 1-60 objects")
    rng = random.Random(f"alfworld:{task}:{seed}:{n_recep}:{n_obj}")
    appliance, prop, template = TASKS[task]
    candidates = [o for o, props in OBJECTS.items() if prop is None or props[prop]]
    target = rng.choice(candidates)
    # Receptacles: n_recep household ones (repeats numbered by the demangler:
    # "cabinet 1", "cabinet 2"), plus the task's appliance.
    receps = [rng.choice(RECEPTACLES) for _ in range(n_recep)]
    goal_recep = rng.choice([r for r in receps if r not in ("GarbageCan",)] or receps)
    if appliance:
        receps.append(appliance)
    recep_ids = [mangle(r, i + 1) for i, r in enumerate(receps)]
    # Objects: the target (two for "two"), then distractors, each in a
    # receptacle other than the goal's.
    holders = [i for i, r in enumerate(receps) if r != goal_recep and r not in ("Microwave", "Fridge", "SinkBasin")]
    if not holders:
        holders = [i for i, r in enumerate(receps) if r not in ("Microwave", "Fridge", "SinkBasin")]
    n_targets = 2 if task == "two" else 1
    objects = [target] * n_targets
    others = [o for o in OBJECTS if o != target]
    objects += [rng.choice(others) for _ in range(max(0, n_obj - n_targets))]
    obj_ids = [mangle(o, 50 + i) for i, o in enumerate(objects)]
    placement = {oid: recep_ids[rng.choice(holders)] for oid in obj_ids}
    locs = [f"loc_bar_{i}_bar_0_bar_0_bar_30" for i in range(len(receps) + 1)]
    otypes = sorted(set(objects))
    rtypes = sorted(set(receps))
    decl = ["agent1 - agent"]
    decl += [f"{o} - object" for o in otypes]  # ALFWorld declares bare type names too
    decl += [f"{o}Type - otype" for o in otypes]
    decl += [f"{r}Type - rtype" for r in rtypes]
    decl += [f"{oid} - object" for oid in obj_ids]
    decl += [f"{rid} - receptacle" for rid in recep_ids]
    decl += [f"{loc} - location" for loc in locs]
    init = ["(atLocation agent1 %s)" % locs[0]]
    for i, (r, rid) in enumerate(zip(receps, recep_ids)):
        init.append(f"(receptacleType {rid} {r}Type)")
        init.append(f"(receptacleAtLocation {rid} {locs[i + 1]})")
        if r in OPENABLE:
            init.append(f"(openable {rid})")
    for o, oid in zip(objects, obj_ids):
        heat, cool, clean = OBJECTS[o]
        init.append(f"(objectType {oid} {o}Type)")
        init.append(f"(pickupable {oid})")
        init.append(f"(inReceptacle {oid} {placement[oid]})")
        for flag, pred in ((heat, "heatable"), (cool, "coolable"), (clean, "cleanable")):
            if flag:
                init.append(f"({pred} {oid})")
    for r in rtypes:
        for o in otypes:
            init.append(f"(canContain {r}Type {o}Type)")
    rt, ot = f"{goal_recep}Type", f"{target}Type"
    state = {"heat": "(isHot ?o)", "cool": "(isCool ?o)", "clean": "(isClean ?o)"}.get(task, "")
    if task == "two":
        goal = (f"(exists (?r - receptacle) (exists (?o1 - object) (exists (?o2 - object) (and "
                f"(receptacleType ?r {rt}) (objectType ?o1 {ot}) (objectType ?o2 {ot}) (not (= ?o1 ?o2)) "
                f"(inReceptacle ?o1 ?r) (inReceptacle ?o2 ?r)))))")
    else:
        goal = (f"(exists (?r - receptacle) (exists (?o - object) (and "
                f"(receptacleType ?r {rt}) (objectType ?o {ot}) {state} (inReceptacle ?o ?r))))")
    problem = "(define (problem plan_submem_%s_%d)\n(:domain alfred)\n(:objects\n%s\n)\n(:init\n%s\n)\n(:goal %s)\n)\n" % (
        task, seed, "\n".join(decl), "\n".join(init), goal)
    domain, grammar = alfworld_data()
    desc = template.format(obj=target.lower(), recep=goal_recep.lower())
    data = {"pddl_domain": domain, "grammar": grammar.replace("UNKNOWN GOAL", desc),
            "pddl_problem": problem, "solvable": True,
            "submem": {"task": task, "seed": seed, "receptacles": n_recep, "objects": n_obj}}
    name = hashlib.sha256(json.dumps([PROTOCOL, task, seed, n_recep, n_obj]).encode()).hexdigest()[:16]
    folder = os.path.join(CACHE, "alfworld", f"{task}-{seed}-{name}")
    path = os.path.join(folder, "game.tw-pddl")
    if os.path.exists(path):
        return path
    os.makedirs(folder, exist_ok=True)
    tmp = path + f".tmp-{os.getpid()}"
    with open(tmp, "w") as f:
        json.dump(data, f)
    os.replace(tmp, path)
    return path


class AlfworldGame(TextWorldGame):
    def __init__(self, path):
        if os.path.isdir(path):
            path = os.path.join(path, "game.tw-pddl")
        try:
            from alfworld.agents.environment.alfred_tw_env import AlfredDemangler, AlfredInfos
        except ImportError as e:
            raise Refused("missing", f"the alfworld package does not import: {e}")
        if not os.path.exists(path):
            raise Refused("game", f"no ALFWorld game at {path}")
        try:
            with open(path) as f:
                json.load(f)
        except ValueError as e:
            raise Refused("game", f"{path} is not ALFWorld game JSON: {e}")
        super().__init__(path, wrappers=[AlfredDemangler(shuffle=False), AlfredInfos])

    def view(self, state, invalid=False):
        out = super().view(state, invalid)
        # ALFWorld states the task in the opening text, not as an objective.
        match = re.search(r"Your task is to: (.*)", out["observation"])
        if match and not out["objective"]:
            out["objective"] = match.group(1).strip()
        if not out["max_score"]:
            out["max_score"] = 1.0
            out["score"] = 1.0 if out["won"] else 0.0
        return out

    def step(self, command):
        out = super().step(command)
        if out["invalid"] and not out["observation"]:
            out["observation"] = "Nothing happens."
        return out


# ------------------------------------------------------------ ScienceWorld

class ScienceWorldGame:
    """`game` is `task:variation` (`boil:0`); the simplified, easy setting."""

    def __init__(self, game, step_limit):
        try:
            from scienceworld import ScienceWorldEnv
        except ImportError as e:
            raise Refused("missing", f"the scienceworld package does not import: {e}")
        task, _, variation = game.partition(":")
        try:
            self.env = ScienceWorldEnv("", envStepLimit=step_limit)
        except Exception as e:
            raise Refused("missing", f"ScienceWorld cannot start (it needs a Java runtime, "
                                     f"e.g. Debian's openjdk-17-jre-headless): {e}")
        names = self.env.get_task_names()
        if task not in names:
            raise Refused("game", f"unknown ScienceWorld task {task!r}; known: {', '.join(names)}")
        try:
            self.env.load(task, int(variation or 0), "easy", generateGoldPath=True)
        except Exception as e:
            raise Refused("game", f"ScienceWorld task {game!r} does not load: {e}")
        self.obs, self.info = self.env.reset()
        self.score = 0.0
        self.done = False
        self.objective = self.env.get_task_description()

    def admissible(self):
        # The valid action-object combinations can run to thousands; the
        # policy sees those the simulator lists as valid right now.
        valid = self.info.get("valid") if isinstance(self.info, dict) else None
        if not valid:
            valid = self.env.get_valid_action_object_combinations()
        return sorted(set(valid))

    def view(self, invalid=False):
        won = self.done and self.score >= 100
        return {"objective": self.objective, "observation": self.obs.strip(),
                "admissible": self.admissible(), "score": self.score, "max_score": 100.0,
                "won": won, "lost": self.done and not won, "done": self.done, "invalid": invalid}

    def reset(self):
        out = self.view()
        out["walkthrough"] = list(self.env.get_gold_action_sequence())
        return out

    def step(self, command):
        invalid = command not in self.admissible()
        self.obs, _, done, self.info = self.env.step(command)
        self.score = float(max(self.info.get("score", 0), 0))
        self.done = bool(done)
        return self.view(invalid)

    def close(self):
        with contextlib.suppress(Exception):
            self.env.close()


# ------------------------------------------------------------------- serve

def hello():
    found = {}
    for env, module in (("textworld", "textworld"), ("alfworld", "alfworld"), ("scienceworld", "scienceworld")):
        try:
            mod = __import__(module)
            found[env] = getattr(mod, "__version__", "unknown")
        except Exception as e:
            found[env] = None
            found[env + "_error"] = f"{type(e).__name__}: {e}"
    return {"protocol": PROTOCOL, "python": sys.version.split()[0], "envs": found}


def serve():
    game = None
    for line in sys.stdin:
        line = line.strip()
        if not line:
            continue
        rid = None
        try:
            try:
                req = json.loads(line)
                rid = req.get("id")
            except ValueError as e:
                raise Refused("request", f"not a JSON request: {e}")
            op = req.get("op")
            env = req.get("env")
            if op == "hello":
                out = hello()
            elif op == "make":
                spec = req.get("spec") or {}
                if env == "textworld":
                    out = {"game": tw_make(spec, float(req.get("timeout") or 170))}
                elif env == "alfworld":
                    out = {"game": alfworld_make(spec)}
                else:
                    raise Refused("request", f"cannot make games for environment {env!r}")
            elif op == "reset":
                if game is not None:
                    game.close()
                    game = None
                path = req.get("game") or ""
                if env == "textworld":
                    game = TextWorldGame(path)
                elif env == "alfworld":
                    game = AlfworldGame(path)
                elif env == "scienceworld":
                    game = ScienceWorldGame(path, int(req.get("step_limit") or 100))
                else:
                    raise Refused("request", f"unknown environment {env!r}; known: textworld, alfworld, scienceworld")
                out = game.reset()
            elif op == "step":
                if game is None:
                    raise Refused("request", "step before reset")
                began = time.perf_counter()
                out = game.step(str(req.get("command", "")))
                # The environment's own time, so that the harness can tell
                # the bridge's overhead apart.
                out["env_seconds"] = time.perf_counter() - began
            elif op == "close":
                answer({"id": rid, "ok": True})
                break
            else:
                raise Refused("request", f"unknown op {op!r}")
            out.update({"id": rid, "ok": True})
            answer(out)
        except Refused as e:
            answer({"id": rid, "ok": False, "kind": e.kind, "error": str(e)})
        except Exception as e:
            traceback.print_exc(file=sys.stderr)
            answer({"id": rid, "ok": False, "kind": "environment", "error": f"{type(e).__name__}: {e}"})
    if game is not None:
        game.close()


if __name__ == "__main__":
    serve()
