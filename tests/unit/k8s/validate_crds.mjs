// Offline validation of Metronome's CustomResourceDefinitions (no API server can run here).
//
// For every CRD in k8s/base/crds:
//   1. its openAPIV3Schema is a *structural* schema as apiextensions.k8s.io/v1 requires
//      (every node typed, no metadata fields beyond name/generateName, x-kubernetes-list-map-keys
//      only on map lists whose items require those keys), and compiles as a JSON Schema;
//   2. every example instance of its kind (k8s/examples/*.yaml) validates;
//   3. every bad instance of its kind (tests/unit/k8s/bad/*.yaml) is rejected.
// Prints one line per check and "N passed, M failed"; exits non-zero on any failure.
//
// Usage: node validate_crds.mjs <repo root>
import fs from "node:fs";
import path from "node:path";
import Ajv from "ajv";
import addFormats from "ajv-formats";
import yaml from "js-yaml";

const root = process.argv[2] ?? path.resolve(path.dirname(new URL(import.meta.url).pathname), "../../..");
let passed = 0;
let failed = 0;
const check = (ok, what, detail = "") => {
  if (ok) passed++;
  else failed++;
  console.log(`${ok ? "ok  " : "FAIL"} ${what}${!ok && detail ? `: ${detail}` : ""}`);
};

const loadAll = (file) => yaml.loadAll(fs.readFileSync(file, "utf8")).filter(Boolean);
const yamlFiles = (dir) =>
  fs.existsSync(dir) ? fs.readdirSync(dir).filter((f) => /\.ya?ml$/.test(f)).map((f) => path.join(dir, f)) : [];

// Structural-schema rules (a subset that catches real mistakes), reported with their JSON path.
function structuralProblems(node, where, problems, isRoot = false) {
  if (typeof node !== "object" || node === null) return problems;
  const isJunctor = (k) => ["anyOf", "oneOf", "allOf", "not"].includes(k);
  if (!isRoot || node.type !== undefined) {
    if (node.type === undefined && !node["x-kubernetes-int-or-string"] && !node["x-kubernetes-preserve-unknown-fields"]) {
      problems.push(`${where}: no type`);
    }
  }
  if (node.properties && node.type !== "object") problems.push(`${where}: properties on a non-object`);
  if (node.items && node.type !== "array") problems.push(`${where}: items on a non-array`);
  if (node.type === "array" && !node.items) problems.push(`${where}: array without items`);
  if (node.properties && node.additionalProperties !== undefined && node.additionalProperties !== false) {
    problems.push(`${where}: properties and additionalProperties together`);
  }
  if (node["x-kubernetes-list-type"] === "map") {
    const keys = node["x-kubernetes-list-map-keys"] ?? [];
    const req = node.items?.required ?? [];
    if (!keys.length) problems.push(`${where}: map list without list-map-keys`);
    for (const k of keys) if (!req.includes(k)) problems.push(`${where}: map key '${k}' not required in items`);
  }
  for (const [k, v] of Object.entries(node)) {
    if (isJunctor(k)) {
      // Inside junctors only value validations are allowed: no types, defaults or descriptions.
      for (const alt of [].concat(v)) {
        if (alt.type || alt.default !== undefined || alt.description) problems.push(`${where}.${k}: typed junctor`);
      }
    }
  }
  if (isRoot && node.properties?.metadata) {
    const extra = Object.keys(node.properties.metadata.properties ?? {}).filter((k) => !["name", "generateName"].includes(k));
    if (extra.length) problems.push(`${where}.metadata: only name/generateName may be constrained`);
  }
  for (const [k, v] of Object.entries(node.properties ?? {})) structuralProblems(v, `${where}.${k}`, problems);
  if (node.items) structuralProblems(node.items, `${where}[]`, problems);
  return problems;
}

// OpenAPI v3.0 (as Kubernetes uses it) to JSON Schema draft-07: boolean exclusive bounds become
// numbers, `nullable` becomes a type union, and x-kubernetes-* annotations are dropped.
function toJsonSchema(node) {
  if (Array.isArray(node)) return node.map(toJsonSchema);
  if (typeof node !== "object" || node === null) return node;
  const out = {};
  for (const [k, v] of Object.entries(node)) {
    if (k.startsWith("x-kubernetes-") || k === "nullable") continue;
    if (k === "exclusiveMinimum" || k === "exclusiveMaximum") continue;
    if (k === "properties") {
      out.properties = Object.fromEntries(Object.entries(v).map(([p, s]) => [p, toJsonSchema(s)]));
    } else {
      out[k] = toJsonSchema(v);
    }
  }
  if (node.exclusiveMinimum === true && node.minimum !== undefined) {
    out.exclusiveMinimum = node.minimum;
    delete out.minimum;
  }
  if (node.exclusiveMaximum === true && node.maximum !== undefined) {
    out.exclusiveMaximum = node.maximum;
    delete out.maximum;
  }
  if (node.nullable && typeof out.type === "string") out.type = [out.type, "null"];
  return out;
}

const ajv = new Ajv({ allErrors: true, strict: true, strictRequired: false });
addFormats(ajv);

const crdFiles = yamlFiles(path.join(root, "k8s/base/crds"));
check(crdFiles.length >= 2, "at least two CRDs (traffic profile, link schedule)", `found ${crdFiles.length}`);

const validators = new Map(); // "group/version/Kind" -> validate function
for (const file of crdFiles) {
  for (const crd of loadAll(file)) {
    const name = crd.metadata?.name ?? path.basename(file);
    const group = crd.spec?.group ?? "";
    check(group && !group.endsWith(".k8s.io") && !group.endsWith(".kubernetes.io"), `${name}: project-owned API group`, group);
    check(name === `${crd.spec?.names?.plural}.${group}`, `${name}: named <plural>.<group>`);
    check((crd.spec?.names?.shortNames ?? []).length > 0, `${name}: has short names`);
    for (const v of crd.spec?.versions ?? []) {
      const schema = v.schema?.openAPIV3Schema;
      check(v.name === "v1alpha1", `${name}: version ${v.name} is v1alpha1`);
      check(v.subresources?.status !== undefined, `${name}/${v.name}: status subresource`);
      check((v.additionalPrinterColumns ?? []).length > 0, `${name}/${v.name}: printer columns`);
      const problems = structuralProblems(schema, "openAPIV3Schema", [], true);
      check(schema && problems.length === 0, `${name}/${v.name}: structural schema`, problems.join("; "));
      for (const col of v.additionalPrinterColumns ?? []) {
        // Every printer column must point at a field the schema declares.
        const parts = col.jsonPath.replace(/^\./, "").split(".");
        let node = schema;
        for (const p of parts) node = node?.properties?.[p] ?? (p === "creationTimestamp" && node?.type === "object" ? {} : undefined);
        check(node !== undefined, `${name}/${v.name}: printer column ${col.name} -> ${col.jsonPath} exists`);
      }
      try {
        validators.set(`${group}/${v.name}/${crd.spec.names.kind}`, ajv.compile(toJsonSchema(schema)));
        check(true, `${name}/${v.name}: schema compiles`);
      } catch (e) {
        check(false, `${name}/${v.name}: schema compiles`, e.message);
      }
    }
  }
}

function validatorFor(obj) {
  return validators.get(`${obj.apiVersion}/${obj.kind}`);
}

let examples = 0;
for (const file of yamlFiles(path.join(root, "k8s/examples"))) {
  for (const obj of loadAll(file)) {
    const validate = validatorFor(obj);
    if (!validate) continue;
    examples++;
    const ok = validate(obj);
    check(ok, `example ${path.basename(file)}: ${obj.kind}/${obj.metadata?.name} is valid`, ajv.errorsText(validate.errors));
  }
}
check(examples >= 2, "example instances exist for the CRDs", `found ${examples}`);

let bad = 0;
for (const file of yamlFiles(path.join(root, "tests/unit/k8s/bad"))) {
  for (const obj of loadAll(file)) {
    const validate = validatorFor(obj);
    check(validate !== undefined, `bad ${path.basename(file)}: has a CRD to check against`);
    if (!validate) continue;
    bad++;
    // Rejected, and for the reason the file states: an error at the annotated field.
    const field = obj.metadata?.annotations?.field ?? "";
    const rejected = !validate(obj);
    const at = (validate.errors ?? []).map((e) => e.instancePath + (e.params?.missingProperty ? `/${e.params.missingProperty}` : ""));
    check(rejected && field && at.some((p) => p.startsWith(field)),
      `bad ${path.basename(file)}: ${obj.metadata?.name} is rejected at ${field} (${obj.metadata?.annotations?.why ?? "?"})`,
      rejected ? `errors at ${at.join(", ")}` : "accepted");
  }
}
check(bad >= 5, "bad instances exist", `found ${bad}`);

console.log(`${passed} passed, ${failed} failed`);
process.exit(failed ? 1 : 0);
