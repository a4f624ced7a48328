// A small JSON Schema check for the approval editor: the keywords tool parameter schemas use
// (type, properties, required, additionalProperties, enum, const, items, lengths, bounds,
// pattern, anyOf/oneOf/allOf, local $ref). The server checks again and has the last word.

function typeOf(value) {
  if (value === null) return "null";
  if (Array.isArray(value)) return "array";
  if (typeof value === "number") return Number.isInteger(value) ? "integer" : "number";
  return typeof value;
}

function fits(type, actual) {
  return type === actual || (type === "number" && actual === "integer");
}

function resolve(root, ref) {
  if (!ref.startsWith("#/")) return {};
  return ref
    .slice(2)
    .split("/")
    .reduce((node, part) => (node ? node[part.replace(/~1/g, "/").replace(/~0/g, "~")] : undefined), root) || {};
}

/** The problems of `value` against `schema`, each "path: what is wrong" (none: it fits). */
export function validate(value, schema, root = schema, path = "args") {
  if (schema === true || schema === undefined || schema === null) return [];
  if (schema === false) return [`${path}: not allowed`];
  if (schema.$ref) return validate(value, resolve(root, schema.$ref), root, path);
  const problems = [];
  const actual = typeOf(value);
  if (schema.type !== undefined) {
    const types = Array.isArray(schema.type) ? schema.type : [schema.type];
    if (!types.some((type) => fits(type, actual))) {
      return [`${path}: must be ${types.join(" or ")}, not ${actual}`];
    }
  }
  if (schema.enum && !schema.enum.some((option) => JSON.stringify(option) === JSON.stringify(value))) {
    problems.push(`${path}: must be one of ${schema.enum.map((v) => JSON.stringify(v)).join(", ")}`);
  }
  if ("const" in schema && JSON.stringify(schema.const) !== JSON.stringify(value)) {
    problems.push(`${path}: must be ${JSON.stringify(schema.const)}`);
  }
  if (actual === "string") {
    if (schema.minLength !== undefined && value.length < schema.minLength) {
      problems.push(`${path}: at least ${schema.minLength} characters`);
    }
    if (schema.maxLength !== undefined && value.length > schema.maxLength) {
      problems.push(`${path}: at most ${schema.maxLength} characters`);
    }
    if (schema.pattern !== undefined && !new RegExp(schema.pattern, "u").test(value)) {
      problems.push(`${path}: must match ${schema.pattern}`);
    }
  }
  if (actual === "number" || actual === "integer") {
    if (schema.minimum !== undefined && value < schema.minimum) problems.push(`${path}: at least ${schema.minimum}`);
    if (schema.maximum !== undefined && value > schema.maximum) problems.push(`${path}: at most ${schema.maximum}`);
    if (schema.exclusiveMinimum !== undefined && value <= schema.exclusiveMinimum) {
      problems.push(`${path}: more than ${schema.exclusiveMinimum}`);
    }
    if (schema.exclusiveMaximum !== undefined && value >= schema.exclusiveMaximum) {
      problems.push(`${path}: less than ${schema.exclusiveMaximum}`);
    }
  }
  if (actual === "object") {
    const properties = schema.properties || {};
    for (const name of schema.required || []) {
      if (!(name in value)) problems.push(`${path}.${name}: required`);
    }
    for (const [name, item] of Object.entries(value)) {
      if (name in properties) problems.push(...validate(item, properties[name], root, `${path}.${name}`));
      else if (schema.additionalProperties !== undefined) {
        problems.push(...validate(item, schema.additionalProperties, root, `${path}.${name}`));
      }
    }
  }
  if (actual === "array") {
    if (schema.minItems !== undefined && value.length < schema.minItems) problems.push(`${path}: at least ${schema.minItems} items`);
    if (schema.maxItems !== undefined && value.length > schema.maxItems) problems.push(`${path}: at most ${schema.maxItems} items`);
    if (schema.items && typeof schema.items === "object") {
      value.forEach((item, i) => problems.push(...validate(item, schema.items, root, `${path}[${i}]`)));
    }
  }
  for (const part of schema.allOf || []) problems.push(...validate(value, part, root, path));
  if (schema.anyOf && !schema.anyOf.some((part) => !validate(value, part, root, path).length)) {
    problems.push(`${path}: fits none of the allowed shapes`);
  }
  if (schema.oneOf && schema.oneOf.filter((part) => !validate(value, part, root, path).length).length !== 1) {
    problems.push(`${path}: must fit exactly one of the allowed shapes`);
  }
  return problems;
}
