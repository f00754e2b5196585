// node validate.mjs FILE: validates an OpenAPI description against the official OpenAPI
// schema of its version (3.1: the 2022-10-07 schema, with JSON Schema 2020-12), as
// @seriousme/openapi-schema-validator bundles it. Prints "valid 3.1.x" or the errors; exit 1
// when invalid.
import { Validator } from "@seriousme/openapi-schema-validator";
import { readFileSync } from "node:fs";

const file = process.argv[2];
const doc = JSON.parse(readFileSync(file, "utf8"));
const validator = new Validator();
const res = await validator.validate(doc);
if (res.valid) {
  console.log(`valid ${validator.version}`);
} else {
  console.log(JSON.stringify(res.errors, null, 2));
  process.exit(1);
}
