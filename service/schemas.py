"""marshmallow types the request schemas share (evaluations, comparisons, pools): strict
JSON booleans, a run or qrels (a mapping or TREC text), a list of measure names, and the
engine's evaluation options."""

from __future__ import annotations

from collections.abc import Mapping
from itertools import chain

from flask import has_request_context, request
from marshmallow import RAISE, Schema, ValidationError, fields, post_load, validate

from cranfield.evaluate import AGGREGATIONS
from cranfield.inputs.grammar import GAINS, INT64_MAX, INT64_MIN
from cranfield.inputs.json_body import Columns
from cranfield.measures import PROFILES, resolve_profile

# A stored input named by id, optionally pinned to one version (``id@version``): the qrels
# and topic metadata routes store under these ids, and every request that names one reads it
# by this one pattern.
STORED_REF = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}(@[0-9a-f]{16})?$"


def stored_ref(kind: str) -> fields.String:
    """An optional request field naming a stored ``kind`` ("qrels", "topic metadata") by
    id, optionally @version."""
    return fields.String(load_default=None, allow_none=False, validate=validate.Regexp(
        STORED_REF, error=f"must be a stored {kind} id, optionally @version"))


class StrictBoolean(fields.Boolean):
    """JSON true/false only (marshmallow would also take 0, 1, "yes"...)."""

    def _deserialize(self, value, attr, data, **kwargs):
        if not isinstance(value, bool):
            raise self.make_error("invalid", input=value)
        return value


def strict_bool(**kwargs) -> fields.Boolean:
    """A :class:`StrictBoolean` field: JSON true/false only."""
    return StrictBoolean(**kwargs)


class RunOrQrels(fields.Field):
    """A ``{topic: {docid: value}}`` mapping or TREC text; its contents are checked by the
    engine, which names the exact path or line of anything wrong."""

    default_error_messages = {"invalid": "must be an object {{topic: {{docid: value}}}} or "
                                         "TREC text"}

    def _deserialize(self, value, attr, data, **kwargs):
        if isinstance(value, Columns):  # a large mapping, already read and checked
            return value
        if isinstance(value, str | bytes | memoryview):  # bytes, memoryview: an uploaded file
            if _blank(value):
                raise ValidationError("is empty")
            return value
        if isinstance(value, Mapping):
            if not value:
                raise ValidationError("is empty: no topics")
            _reject_booleans(value, attr)
            return value
        raise self.make_error("invalid")


class NameList(fields.Field):
    """A list of 1 to ``max_names`` non-empty strings (measure names), checked in one pass:
    a ``List(String(...))`` deserialises and validates each element as a field of its own,
    which costs a small evaluation more than the evaluation's reading of its run. Errors
    are those marshmallow's List(String) gives, by index (``measures[2]``)."""

    default_error_messages = {"invalid": "Not a valid list.",
                              "length": "Length must be between 1 and {max_names}.",
                              "null": "Field may not be null.",
                              "string": "Not a valid string.",
                              "empty": "Shorter than minimum length 1."}

    def __init__(self, *, max_names: int, **kwargs):
        super().__init__(**kwargs)
        self.max_names = max_names

    def _element_error(self, value) -> str | None:
        if value is None:
            return self.error_messages["null"]
        if not isinstance(value, str):
            return self.error_messages["string"]
        return None if value else self.error_messages["empty"]

    def _deserialize(self, value, attr, data, **kwargs):
        if not isinstance(value, list | tuple):
            raise self.make_error("invalid")
        errors = {i: [message] for i, v in enumerate(value)
                  if (message := self._element_error(v)) is not None}
        if errors:
            raise ValidationError(errors)
        if not 1 <= len(value) <= self.max_names:
            raise self.make_error("length", max_names=self.max_names)
        return list(value)


def _blank(value: str | bytes | memoryview) -> bool:
    """Empty or only whitespace (isspace stops at the first other character; a view is
    copied whole only if its first 64 KiB are blank)."""
    if isinstance(value, memoryview):
        return not len(value) or (bytes(value[:65536]).isspace() and bytes(value).isspace())
    return not value or value.isspace()


def _reject_booleans(mapping: Mapping, attr: str) -> None:
    """JSON true/false are not scores or grades (Python would read them as 1/0). One pass over
    the value types in C; the slow search for the path runs only when one is found."""
    docs = [d for d in mapping.values() if isinstance(d, Mapping)]
    if bool in set(map(type, chain.from_iterable(d.values() for d in docs))):
        for topic, d in mapping.items():
            for docid, v in (d.items() if isinstance(d, Mapping) else ()):
                if isinstance(v, bool):
                    raise ValidationError({f"{topic}.{docid}": [
                        f"{str(v).lower()} is not a number"]})


#: the key of ``request.environ`` saying the request named a profile (OptionsSchema)
PROFILE_NAMED = "cranfield.profile_named"


class OptionsSchema(Schema):
    """The engine's evaluation options (``cranfield.evaluate``'s keyword arguments)."""

    class Meta:
        unknown = RAISE

    # not named: trec_eval-9.0.8, or cranfield's for real gains (_settle_profile)
    profile = fields.String(load_default=None, allow_none=False,
                            validate=validate.OneOf(PROFILES))
    # 64-bit bounds, as the engine's (a 40-digit level or depth 2**63 was a 500)
    relevance_level = fields.Integer(load_default=1, strict=True, validate=validate.Range(
        min=INT64_MIN, max=INT64_MAX))
    judged_only = strict_bool(load_default=False)
    depth = fields.Integer(load_default=None, allow_none=True, strict=True,
                           validate=validate.Range(min=0, max=INT64_MAX))
    complete_topics = strict_bool(load_default=False)
    collection_size = fields.Integer(load_default=0, strict=True,
                                     validate=validate.Range(min=0, max=INT64_MAX))
    aggregation = fields.String(load_default="macro",
                                validate=validate.OneOf(AGGREGATIONS))

    @post_load
    def _settle_profile(self, data, **kwargs):
        # a request naming no profile runs under the one its gains call for (issue #31);
        # the request remembers that it named one, for stored qrels declaring real gains
        # (service.inputs.settle_stored_gains: those, too, are read under cranfield's). Kept
        # in the request's WSGI environ, which lives and dies with the request (flask.g
        # belongs to the app context, which may outlive it: a later request read it)
        if data.get("profile") is not None and has_request_context():
            request.environ[PROFILE_NAMED] = True
        data["profile"] = resolve_profile(data.get("profile"), data.get("gains"))
        if data.get("gains") == "real" and not PROFILES[data["profile"]].reads_real_gains:
            # a trec_eval profile reads grades as trec_eval does: the declaration changes
            # nothing, and a grade that is not an integer is refused as without it (the
            # engine's plan_evaluation, in every reader before it)
            del data["gains"]
        return data


def _check_zscores_size(value: Mapping) -> None:
    """Budgets before work: the topics of ``options.zscores`` are held to MAX_TOPICS and its
    pairs to MAX_EVALUATION_VALUES (a pair per value an evaluation may give) before a pair is
    read (found in review: 2M pairs took 16 s and 1.2 GB of reading, then were evaluated)."""
    from flask import current_app

    cfg = current_app.config
    if len(value) > cfg["MAX_TOPICS"]:
        raise ValidationError(f"{len(value):,} topics, over MAX_TOPICS {cfg['MAX_TOPICS']:,}")
    pairs = sum(len(v) for v in value.values() if isinstance(v, Mapping))
    if pairs > cfg["MAX_EVALUATION_VALUES"]:
        raise ValidationError(f"{pairs:,} (topic, measure) pairs, over MAX_EVALUATION_VALUES "
                              f"{cfg['MAX_EVALUATION_VALUES']:,}")


class ZScoresField(fields.Field):
    """``options.zscores`` (trec_eval's -Z): ``{topic: {measure: [mean, stddev]}}``, checked
    by the engine's one reader (:func:`cranfield.inputs.zscores.read_zscores`), whose error names
    the path (``options.zscores.301.map``). Kept as given: a queued job carries it as JSON."""

    default_error_messages = {"invalid": "must be an object {{topic: {{measure: [mean, "
                                         "stddev]}}}}"}

    def _deserialize(self, value, attr, data, **kwargs):
        from cranfield.errors import InputError
        from cranfield.inputs.zscores import read_zscores

        if not isinstance(value, Mapping):
            raise self.make_error("invalid")
        _check_zscores_size(value)
        try:
            read_zscores(value, name="zscores")
        except InputError as exc:
            where = (exc.field or "").removeprefix("zscores").removeprefix(".")
            raise ValidationError({where: [exc.reason]} if where else [exc.reason]) from None
        return value


class TopicMetadataField(fields.Field):
    """``options.topic_metadata`` (issue #28, :mod:`cranfield.inputs.segments`): the JSON mapping
    ``{topic: {"segments": [...], "weight": w}}``, or its text (``topic LABELS [WEIGHT]``
    lines; a multipart ``topic_metadata`` part), held to MAX_TOPICS before a topic is read,
    then read by the engine's one reader, whose error names the path
    (``options.topic_metadata.q1.weight``) or the line. Loaded as the canonical mapping
    (:meth:`TopicMetadata.as_json`): text is never handed on as a str (the engine would
    take a str naming a file for a path), and a queued job carries it as JSON."""

    default_error_messages = {"invalid": "must be an object {{topic: {{\"segments\": "
                                         "[label, ...], \"weight\": number}}}} or its text"}

    def _deserialize(self, value, attr, data, **kwargs):
        from flask import current_app

        from cranfield.errors import InputError
        from cranfield.inputs.segments import read_topic_metadata

        if isinstance(value, str):
            value = value.encode("utf-8")
        elif isinstance(value, memoryview):
            value = bytes(value)
        if not isinstance(value, Mapping | bytes):
            raise self.make_error("invalid")
        if isinstance(value, bytes) and _blank(value):
            raise ValidationError("is empty")
        try:
            md = read_topic_metadata(value, name="topic_metadata",
                                     max_topics=current_app.config["MAX_TOPICS"],
                                     max_segments=current_app.config["MAX_SEGMENTS"])
        except InputError as exc:
            said = f"line {exc.line}: {exc.reason}" if exc.line is not None else exc.reason
            where = (exc.field or "").removeprefix("topic_metadata").removeprefix(".")
            if exc.code == "too-large":  # over MAX_TOPICS / MAX_SEGMENTS: 413, as stored
                from service.problems import Problem  # metadata and inline qrels over theirs

                field = "options.topic_metadata" + (f".{where}" if exc.line is None and where
                                                    else "")
                raise Problem(413, "Request Entity Too Large", f"{field}: {said}",
                              kind="too-large", errors={field: [said]}) from None
            if exc.line is not None:
                raise ValidationError([said]) from None
            raise ValidationError({where: [exc.reason]} if where else [exc.reason]) from None
        return md.as_json()


class EvaluationOptionsSchema(OptionsSchema):
    """An evaluation's options: the engine's, ``zscores`` (comparisons have no -Z) and
    ``topic_metadata``."""

    zscores = ZScoresField(allow_none=True)
    topic_metadata = TopicMetadataField(allow_none=True)
    # trec_eval's -R (issue #28): absent, no key (ordinary qrels, the options as before);
    # service.rel_formats resolves it (a stored version's kind) and reads the formats
    qrels_format = fields.String(validate=validate.OneOf(
        ("qrels", "qrels_jg", "prefs", "qrels_prefs")))
    # real-valued gains (issue #31): absent, no key (integer grades, as trec_eval)
    gains = fields.String(validate=validate.OneOf(GAINS))

    @post_load
    def _without_null_zscores(self, data, **kwargs):
        # absent (or null): no key at all, so options without -Z are exactly as before
        if data.get("zscores", ...) is None:
            del data["zscores"]
        if data.get("topic_metadata", ...) is None:  # likewise: no segments, no key
            del data["topic_metadata"]
        return data
