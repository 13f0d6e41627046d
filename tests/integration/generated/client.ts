// The TypeScript half of tests/integration/test_generated_clients.py: a client a TypeScript
// team would write from openapi.yaml with openapi-typescript's types (default settings) and
// openapi-fetch. The test generates ./api.d.ts beside a copy of this file, type-checks it with
// tsc (a type error fails the test: the contract must let these calls compile as written),
// then runs it with node against a live service. It prints one JSON object of what the
// service answered; the Python test asserts the values.
//   node client.js BASE_URL INPUT_JSON SYSTEM
import { readFileSync } from "node:fs";
import createClient from "openapi-fetch";
import type { components, paths } from "./api.js";

type Schemas = components["schemas"];

interface Input {
  qrels_text: string;
  run_text: string;
  worse_text: string;
  qrels_map: Schemas["QrelsMapping"];
  run_map: Schemas["RunMapping"];
  measures: string[];
}

const [base, inputPath, system] = process.argv.slice(2);
const input: Input = JSON.parse(readFileSync(inputPath, "utf8"));
// answers as JSON (application/json, application/problem+json): the service also answers
// text/plain, text/csv and text/html, and openapi-fetch types `data` as every 2xx
// representation unless told which media types the client reads
const client = createClient<paths, `application/${string}json`>({ baseUrl: base });

/** The body of a 2xx answer, or an Error saying the status and the problem. */
function ok<T>(answer: { data?: T; error?: unknown; response: Response }, what: string): T {
  if (answer.data === undefined) {
    throw new Error(`${what}: ${answer.response.status} ${JSON.stringify(answer.error)}`);
  }
  return answer.data;
}

/** A synchronous evaluation's document (a 202 Job here would be a failure of the test). */
function evaluation(doc: Schemas["Evaluation"] | Schemas["Job"], what: string) {
  if ("status" in doc) throw new Error(`${what}: queued unexpectedly (${doc.id})`);
  return doc;
}

const qrelsId = `${system}-qrels`;

// store qrels: as a JSON mapping, then as TREC text (text/plain) under a second id
const storedJson = ok(await client.PUT("/v1/qrels/{qrels_id}", {
  params: { path: { qrels_id: qrelsId } },
  body: { qrels: input.qrels_map },
}), "PUT qrels (JSON)");
const storedText = ok(await client.PUT("/v1/qrels/{qrels_id}", {
  params: { path: { qrels_id: `${qrelsId}-text` } },
  body: input.qrels_text,
  headers: { "Content-Type": "text/plain" },
  bodySerializer: (body) => body as string,
}), "PUT qrels (text/plain)");

// the smallest evaluation: only qrels and run (every other member optional in the types)
const byMapping = evaluation(ok(await client.POST("/v1/evaluations", {
  body: { qrels: input.qrels_map, run: input.run_map },
}), "POST evaluation (mappings)"), "mappings");

// TREC text in JSON against the stored qrels, recorded as the system's first result
const one = evaluation(ok(await client.POST("/v1/evaluations", {
  body: {
    run: input.run_text, qrels_id: qrelsId, measures: input.measures,
    record: { system, label: "one" },
  },
}), "POST evaluation (text, record)"), "one");

// the worse run as multipart/form-data: the form's fields, record as JSON text
const form: Schemas["EvaluationForm"] = {
  run: input.worse_text, qrels_id: `${qrelsId}-text`, measures: input.measures.join(","),
  record: { system, label: "two" },
};
const two = evaluation(ok(await client.POST("/v1/evaluations", {
  body: form,
  bodySerializer: (body) => {
    const data = new FormData();
    for (const [name, value] of Object.entries(body)) {
      data.append(name, typeof value === "string" ? value : JSON.stringify(value));
    }
    return data;
  },
}), "POST evaluation (multipart, record)"), "two");

const [oneId, twoId] = [one.recorded?.id, two.recorded?.id];
if (!oneId || !twoId) throw new Error("a recorded evaluation has no recorded.id");

const pinned = ok(await client.PUT("/v1/systems/{name}/baseline", {
  params: { path: { name: system } },
  body: { result_id: oneId },
}), "PUT baseline");

// gate the second result against the pinned baseline
const comparison = ok(await client.POST("/v1/comparisons", {
  body: {
    runs: [{ result_id: twoId }], qrels_id: qrelsId, measures: ["map"],
    baseline: { system }, gate: { measure: "map", max_drop: 0.01, test: "t" },
  },
}), "POST comparison (gate)");
if ("status" in comparison) throw new Error("the comparison was queued unexpectedly");

const trend = ok(await client.GET("/v1/systems/{name}/trend", {
  params: { path: { name: system }, query: { measure: "map" } },
}), "GET trend");

// queued: Prefer respond-async gives a Job to poll until it has the evaluation
const queued = ok(await client.POST("/v1/evaluations", {
  params: { header: { Prefer: "respond-async" } },
  body: { run: input.run_text, qrels_id: qrelsId, measures: input.measures },
}), "POST evaluation (queued)");
if (!("status" in queued)) throw new Error("Prefer: respond-async was not queued");
let job: Schemas["Job"] = queued;
const deadline = Date.now() + 120_000;
while (job.status === "queued" || job.status === "started") {
  if (Date.now() > deadline) throw new Error(`job ${job.id} still ${job.status}`);
  await new Promise((resolve) => setTimeout(resolve, 50));
  job = ok(await client.GET("/v1/jobs/{job_id}", {
    params: { path: { job_id: queued.id } },
  }), "GET job");
}
const queuedResult = job.result && "aggregate" in job.result ? job.result : undefined;

// several runs against the stored qrels in one call: one document per run, in order
const batch = ok(await client.POST("/v1/evaluations/batch", {
  body: {
    runs: [{ name: "good", run: input.run_text }, { name: "worse", run: input.worse_text }],
    qrels_id: qrelsId, measures: input.measures,
  },
}), "POST evaluations/batch");
// a small batch is answered at once (200); a large one would be queued (202, a Job)
if ("status" in batch) throw new Error(`the batch was queued unexpectedly (${batch.id})`);

console.log(JSON.stringify({
  stored_json: { judgments: storedJson.judgments, topics: storedJson.topics },
  stored_text: { judgments: storedText.judgments, topics: storedText.topics },
  mapping_aggregate: byMapping.aggregate,
  one: { id: oneId, aggregate: one.aggregate },
  two: { id: twoId, aggregate: two.aggregate },
  pinned: pinned.id,
  gate: {
    verdict: comparison.gate?.verdict,
    baseline: comparison.baseline,
    drop: comparison.gate?.checks[0]?.drop,
  },
  trend: trend.points.map((p) => ({ id: p.id, mean: p.mean, verdict: p.gate?.verdict ?? null })),
  trend_baseline: trend.baseline,
  queued: { status: job.status, aggregate: queuedResult?.aggregate ?? null },
  batch: batch.evaluations.map((e) => ({ name: e.name, aggregate: e.aggregate })),
}));
