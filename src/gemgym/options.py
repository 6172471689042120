"""Typed option sections: settings declared once, as dataclass fields, and what is made of them.

A *section* is a dataclass whose fields are declared with :func:`option` (a default, a help text
and, where the flag is not the field's name, its flag). A *config* is a dataclass whose fields
are sections (``config.rl.gamma``). From the fields alone this module makes:

* the command line: :func:`add_option_groups` adds one argparse group per section, one flag per
  field (``--{prefix}{name}``, ``_`` written ``-``; the section's ``flag_prefix``; or the field's
  own ``flag``), its type, choices and help, ``--x/--no-x`` for a bool, deprecated spellings that
  still work and warn (:class:`DeprecatedOptionWarning`); :func:`values_from_args` reads back
  only the flags given, as a nested dict, so that they override a config file's values;
* the config file: :func:`to_nested` gives the nested dict of a config (one table per section,
  ``None`` left out), :func:`dumps_toml` writes it as TOML, :func:`load_toml` reads it;
* configs from nested dicts: :func:`build_config` (unknown sections and settings are errors that
  name them; values are checked against the field's type: an int is a float, a list a tuple).

Shared groups (e.g. a seed or an output folder that several commands take) are sections too:
:func:`section_options` lists one section's options and :func:`add_option_groups` adds any list
of them, so a command can take a config's sections and shared ones side by side.

Errors name the parameter as ``section.name`` (``rl.gamma``); :func:`flags_in_message` rewrites
such names into the flags a command-line user typed.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import tomllib
import types
import typing
import warnings
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import MISSING, dataclass, field, fields, is_dataclass
from pathlib import Path
from typing import Any

from gemgym.errors import ConfigError

__all__ = [
    "DeprecatedOptionWarning",
    "Option",
    "OptionMeta",
    "add_option_groups",
    "build_config",
    "build_section",
    "config_options",
    "dumps_toml",
    "flags_in_message",
    "load_toml",
    "merge_nested",
    "option",
    "rebase",
    "section_options",
    "to_nested",
    "values_from_args",
]

_META_KEY = "gemgym.option"


class DeprecatedOptionWarning(FutureWarning):
    """A flag was given under an old spelling; the message names the new one."""


@dataclass(frozen=True)
class OptionMeta:
    """What a field says about itself besides its type and default."""

    help: str
    flag: str | None = None
    """The flag when it is not ``--{section prefix}{name}``."""
    deprecated: tuple[str, ...] = ()
    """Old spellings of the flag: still accepted, with a :class:`DeprecatedOptionWarning`."""
    metavar: str | tuple[str, ...] | None = None
    choices: Any = None
    """The values the flag takes (anything with ``__contains__`` and ``__iter__``)."""
    parse: Callable[[str], Any] | None = None
    """How the flag's text becomes the value, when the field's type does not say (e.g. JSON)."""
    positional: bool = False
    """A positional argument (optional: a config file may give it) instead of a flag."""
    repeat: bool = False
    """The flag may be given more than once: its dicts are merged, its lists joined (e.g.
    ``--env-kwarg K=V`` with a ``parse`` that gives ``{K: V}``)."""
    aliases: tuple[str, ...] = ()
    """Other spellings of the flag, with the same meaning, accepted without a warning."""
    help_names_default: bool = False
    """The help says the default itself (a shared option whose default each command sets:
    ``--out``), so none is appended to it."""


def option(
    default: Any = MISSING,
    *,
    help: str,
    default_factory: Callable[[], Any] | None = None,
    flag: str | None = None,
    deprecated: tuple[str, ...] = (),
    metavar: str | tuple[str, ...] | None = None,
    choices: Any = None,
    parse: Callable[[str], Any] | None = None,
    positional: bool = False,
    repeat: bool = False,
    aliases: tuple[str, ...] = (),
    help_names_default: bool = False,
) -> Any:
    """A dataclass field of a section, with its help and flag (see :class:`OptionMeta`)."""
    meta = {
        _META_KEY: OptionMeta(
            help=help,
            flag=flag,
            deprecated=deprecated,
            metavar=metavar,
            choices=choices,
            parse=parse,
            positional=positional,
            repeat=repeat,
            aliases=aliases,
            help_names_default=help_names_default,
        )
    }
    if default_factory is not None:
        return field(default_factory=default_factory, metadata=meta)
    return field(default=default, metadata=meta)


def _unwrap(tp: Any) -> tuple[Any, bool]:
    """``(X, True)`` for ``X | None``, ``(X, False)`` otherwise."""
    if typing.get_origin(tp) in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        if len(args) == 1:
            return args[0], len(args) < len(typing.get_args(tp))
    return tp, False


@dataclass(frozen=True)
class Option:
    """One field of one section, as the command line and the config file see it."""

    section: str
    name: str
    type: Any
    default: Any
    """The field's default (``default_factory()`` for one made by a factory)."""
    meta: OptionMeta
    prefix: str = ""
    group: str | None = None
    """The argument group it is shown in, when not its section's (see :func:`rebase`)."""

    @property
    def path(self) -> str:
        """``section.name``: how errors and the config file name it."""
        return f"{self.section}.{self.name}"

    @property
    def flag(self) -> str:
        """The flag (or, for a positional argument, its metavar)."""
        if self.meta.positional:
            return self.name.upper()
        return self.meta.flag or "--" + (self.prefix + self.name).replace("_", "-")

    @property
    def base_type(self) -> Any:
        """The type without ``| None``."""
        return _unwrap(self.type)[0]

    @property
    def optional(self) -> bool:
        """Whether ``None`` is a value (then it is the default, and a file leaves it out)."""
        return _unwrap(self.type)[1]

    def coerce(self, value: Any) -> Any:
        """``value`` (read from a file or a dict) as the field's type; :class:`ConfigError`
        naming :attr:`path` when it is not one."""
        if value is None:
            if self.optional:
                return None
            raise ConfigError(f"{self.path} takes no null value")
        return _coerce(self.base_type, value, self.path)


def _coerce(tp: Any, value: Any, path: str) -> Any:
    origin = typing.get_origin(tp)
    if tp is bool:
        if isinstance(value, bool):
            return value
    elif tp is int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    elif tp is float:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
    elif tp is str:
        if isinstance(value, str):
            return value
    elif origin is tuple:
        items = typing.get_args(tp)
        if isinstance(value, (list, tuple)) and len(value) == len(items):
            return tuple(_coerce(t, v, path) for t, v in zip(items, value, strict=True))
        if isinstance(value, (list, tuple)) and len(set(items)) == 1:
            # the wrong number of items: left to the section's validation, which knows what
            # they mean (it names them better than "a list of 2 numbers")
            return tuple(_coerce(items[0], v, path) for v in value)
    elif origin is dict or tp is dict:
        if isinstance(value, dict):
            return dict(value)
    else:  # pragma: no cover - a field type this module does not know
        return value
    raise ConfigError(f"{path} must be {_type_name(tp)}, got {value!r}")


def _type_name(tp: Any) -> str:
    if typing.get_origin(tp) is tuple:
        items = typing.get_args(tp)
        plural = {bool: "booleans", int: "integers", float: "numbers", str: "strings"}
        return f"a list of {len(items)} {plural.get(items[0], 'values')}"
    if typing.get_origin(tp) is dict or tp is dict:
        return "a table (dict)"
    return {bool: "true or false", int: "an integer", float: "a number", str: "a string"}.get(
        tp, str(tp)
    )


def section_options(section: str, cls: type[Any]) -> list[Option]:
    """The options of the section dataclass ``cls``, named ``section``."""
    hints = typing.get_type_hints(cls)
    prefix = str(getattr(cls, "flag_prefix", ""))
    out = []
    for f in fields(cls):
        meta = f.metadata.get(_META_KEY)
        if meta is None:
            raise TypeError(f"{cls.__name__}.{f.name} is not declared with gemgym.options.option")
        if f.default is not MISSING:
            default = f.default
        elif f.default_factory is not MISSING:
            default = f.default_factory()
        else:
            default = MISSING
        out.append(Option(section, f.name, hints[f.name], default, meta, prefix))
    return out


def rebase(opt: Option, path: str) -> Option:
    """The shared option ``opt`` as the config field ``path`` (``section.name``): its flag,
    help and default as ``opt`` has them, shown in ``opt``'s group, its value read into
    ``path`` (so that a command whose config holds the setting takes the shared flag for it,
    one flag with one meaning)."""
    from dataclasses import replace

    section, _, name = path.partition(".")
    derived = "--" + name.replace("_", "-")
    flag = None if opt.meta.positional or opt.flag == derived else opt.flag
    meta = replace(opt.meta, flag=flag)
    group = opt.group or opt.section
    return replace(opt, section=section, name=name, meta=meta, prefix="", group=group)


def config_options(cls: type[Any]) -> list[Option]:
    """The options of every section of the config dataclass ``cls`` (its dataclass fields), in
    order."""
    hints = typing.get_type_hints(cls)
    out: list[Option] = []
    for f in fields(cls):
        if is_dataclass(hints[f.name]):
            out += section_options(f.name, hints[f.name])
    return out


# -- the command line ---------------------------------------------------------------------


class _Set(argparse.Action):
    """Sets the option's value: a bool from the spelling (``--x`` or ``--no-x``), a tuple from
    its items; warns when the spelling is a deprecated one."""

    def __init__(
        self,
        option_strings: Sequence[str],
        dest: str,
        *,
        is_bool: bool = False,
        repeat: bool = False,
        replacements: Mapping[str, str] | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(option_strings, dest, **kwargs)
        self.is_bool = is_bool
        self.repeat = repeat
        self.replacements = dict(replacements or {})

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: Any,
        option_string: str | None = None,
    ) -> None:
        if option_string in self.replacements:
            warnings.warn(
                f"{option_string} is deprecated: use {self.replacements[option_string]}",
                DeprecatedOptionWarning,
                stacklevel=2,
            )
        if self.is_bool:
            values = not (option_string or "").startswith("--no-")
        elif isinstance(values, list):
            values = tuple(values)
        if self.repeat and hasattr(namespace, self.dest):
            before = getattr(namespace, self.dest)
            if isinstance(before, dict) and isinstance(values, dict):
                values = {**before, **values}
            elif isinstance(before, (list, tuple)) and isinstance(values, (list, tuple)):
                values = [*before, *values]
        setattr(namespace, self.dest, values)


def _default_text(opt: Option) -> str:
    if opt.default is MISSING or opt.default is None:
        return ""
    if opt.base_type is bool:
        return ""
    value = opt.default
    if isinstance(value, (dict, str)) and not value:  # nothing: not "(default )"
        return ""
    if isinstance(value, dict):
        return f" (default {json.dumps(value)})"
    return f" (default {value})"


def add_option_groups(
    parser: argparse.ArgumentParser,
    options: Sequence[Option],
    *,
    titles: Mapping[str, str] | None = None,
) -> None:
    """Add ``options`` to ``parser``: one argument group per section (titled from ``titles``
    or the section's name), every flag's default ``SUPPRESS`` so that
    :func:`values_from_args` sees only the flags given."""
    groups: dict[str, Any] = {}
    for opt in options:
        key = opt.group or opt.section
        if key not in groups:
            groups[key] = parser.add_argument_group((titles or {}).get(key, key))
        _add_option(groups[key], opt)


def _add_option(group: Any, opt: Option) -> None:
    meta = opt.meta
    help_text = meta.help if meta.help_names_default else meta.help + _default_text(opt)
    base = opt.base_type
    kwargs: dict[str, Any] = {"default": argparse.SUPPRESS}
    if meta.positional:
        group.add_argument(
            opt.path, nargs="?", metavar=opt.flag, help=help_text, action=_Set, **kwargs
        )
        return
    kwargs["dest"] = opt.path
    if base is bool:
        kwargs.update(nargs=0, is_bool=True)
        spellings = [opt.flag, "--no-" + opt.flag.removeprefix("--")]
        old = [s for d in meta.deprecated for s in (d, "--no-" + d.removeprefix("--"))]
        replacements = dict(zip(old, [s for _ in meta.deprecated for s in spellings], strict=True))
        if opt.default is True:
            help_text += " (default: on)"
    else:
        spellings = [opt.flag, *meta.aliases]
        old = list(meta.deprecated)
        replacements = dict.fromkeys(old, opt.flag)
        if typing.get_origin(base) is tuple:
            items = typing.get_args(base)
            kwargs.update(nargs=len(items), type=items[0])
        else:
            kwargs["type"] = meta.parse or base
            kwargs["repeat"] = meta.repeat
        if meta.choices is not None:
            kwargs["choices"] = meta.choices
        if meta.metavar is not None:
            kwargs["metavar"] = meta.metavar
        elif meta.choices is None:
            kwargs["metavar"] = opt.flag.removeprefix("--").upper().replace("-", "_")
    if old:
        help_text += f" (formerly {', '.join(old)})"
    group.add_argument(*spellings, action=_Set, help=help_text, **kwargs)
    if old:
        group.add_argument(
            *old, action=_Set, help=argparse.SUPPRESS, replacements=replacements, **kwargs
        )


def values_from_args(
    args: argparse.Namespace, options: Iterable[Option]
) -> dict[str, dict[str, Any]]:
    """The values of the flags given in ``args`` (parsed by a parser that
    :func:`add_option_groups` made), nested by section."""
    out: dict[str, dict[str, Any]] = {}
    for opt in options:
        if hasattr(args, opt.path):
            out.setdefault(opt.section, {})[opt.name] = getattr(args, opt.path)
    return out


def flags_in_message(
    message: str, options: Iterable[Option], *, keep_names: bool = False, bare: bool = False
) -> str:
    """``message`` with each ``section.name`` it holds written as the option's flag (with
    ``keep_names``: as ``section.name (--flag)``, for settings that may come from a file).
    With ``bare``, the parameters are named without their section (a library's keyword
    arguments: ``max_turns``), and each becomes ``name (--flag)``."""
    options = list(options)
    if bare:
        keep_names = True
        by_path = {opt.name: opt.flag for opt in options if not opt.meta.positional}
    else:
        by_path = {opt.path: opt.flag for opt in options}
    if not by_path:
        return message
    names = sorted(by_path, key=len, reverse=True)
    pattern = re.compile(r"(?<![\w./-])(" + "|".join(map(re.escape, names)) + r")(?![\w-])")

    def flag(m: re.Match[str]) -> str:
        path = m.group(1)
        return f"{path} ({by_path[path]})" if keep_names else by_path[path]

    return pattern.sub(flag, message)


# -- nested dicts and files ---------------------------------------------------------------


def _section_values(cls: type[Any], section: str, values: Any) -> dict[str, Any]:
    """``values`` checked as settings of the section ``cls``: names known, types right."""
    if not isinstance(values, Mapping):
        raise ConfigError(f"section {section!r} must be a table of its settings, got {values!r}")
    options = {opt.name: opt for opt in section_options(section, cls)}
    unknown = sorted(set(values) - set(options))
    if unknown:
        raise ConfigError(
            f"{[f'{section}.{k}' for k in unknown]} are not settings; the settings of "
            f"{section!r}: {list(options)}"
        )
    return {k: options[k].coerce(v) for k, v in values.items()}


def build_section(cls: type[Any], section: str, values: Mapping[str, Any]) -> Any:
    """The section ``cls`` from a dict of its settings (each checked against its type)."""
    return cls(**_section_values(cls, section, values))


def build_config(cls: type[Any], nested: Mapping[str, Any]) -> Any:
    """The config dataclass ``cls`` from a dict of sections (a section left out is made from
    no settings: its defaults). Every name and type is checked before any section is made
    (and checks its values)."""
    hints = typing.get_type_hints(cls)
    sections = [f.name for f in fields(cls) if is_dataclass(hints[f.name])]
    unknown = sorted(set(nested) - set(sections))
    if unknown:
        raise ConfigError(f"unknown sections {unknown}; the sections: {sections}")
    values = {s: _section_values(hints[s], s, nested.get(s, {})) for s in sections}
    return cls(**{s: hints[s](**values[s]) for s in sections})


def to_nested(config: Any) -> dict[str, dict[str, Any]]:
    """The config's values by section, as a file holds them: ``None`` left out (it is the
    default of every field that takes it), tuples as lists."""
    out: dict[str, dict[str, Any]] = {}
    hints = typing.get_type_hints(type(config))
    for f in fields(config):
        if not is_dataclass(hints[f.name]):
            continue
        section = getattr(config, f.name)
        table: dict[str, Any] = {}
        for g in fields(section):
            value = getattr(section, g.name)
            if value is None:
                continue
            table[g.name] = list(value) if isinstance(value, tuple) else value
        out[f.name] = table
    return out


def merge_nested(
    base: Mapping[str, Mapping[str, Any]], over: Mapping[str, Mapping[str, Any]]
) -> dict[str, dict[str, Any]]:
    """``base`` with ``over``'s settings put over its own, section by section."""
    out = {k: dict(v) for k, v in base.items()}
    for section, values in over.items():
        out.setdefault(section, {}).update(values)
    return out


def load_toml(path: str | Path) -> dict[str, Any]:
    """A TOML file's tables (:class:`ConfigError` naming the file when it cannot be read)."""
    try:
        with open(path, "rb") as f:
            return tomllib.load(f)
    except FileNotFoundError:
        raise ConfigError(f"config file {str(path)!r} does not exist") from None
    except tomllib.TOMLDecodeError as e:
        raise ConfigError(f"config file {str(path)!r} is not valid TOML: {e}") from None


def dumps_toml(nested: Mapping[str, Mapping[str, Any]], *, header: str = "") -> str:
    """TOML text of ``{section: {name: value}}`` (values: bool, int, float, str, lists of them
    and tables of JSON-like values without null); ``header`` becomes leading comment lines."""
    lines = [f"# {line}" if line else "#" for line in header.splitlines()]
    for section, values in nested.items():
        _table(lines, section, values)
    return "\n".join(lines).lstrip("\n") + "\n"


def _key(name: str) -> str:
    return name if re.fullmatch(r"[A-Za-z0-9_-]+", name) else json.dumps(name)


def _table(lines: list[str], name: str, values: Mapping[str, Any]) -> None:
    if lines:
        lines.append("")
    lines.append(f"[{name}]")
    subtables = []
    for key, value in values.items():
        if isinstance(value, Mapping):
            subtables.append((key, value))
        else:
            lines.append(f"{_key(key)} = {_toml_value(value, f'{name}.{key}')}")
    for key, value in subtables:
        _table(lines, f"{name}.{_key(key)}", value)


def _toml_value(value: Any, where: str) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if math.isnan(value):
            return "nan"
        if math.isinf(value):
            return "inf" if value > 0 else "-inf"
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_toml_value(v, where) for v in value) + "]"
    if isinstance(value, Mapping):
        items = ", ".join(f"{_key(k)} = {_toml_value(v, where)}" for k, v in value.items())
        return "{" + items + "}"
    raise ConfigError(f"{where}: {value!r} cannot be written in a TOML file")
