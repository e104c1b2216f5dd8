// Validates the OpenAPI documents named on the command line with
// @apidevtools/swagger-parser (resolving every $ref and checking the
// document against the OpenAPI 3.1 schema): prints "valid <file>
// <version>" for each, or the validator's error and exits 1.
"use strict";
const SwaggerParser = require("@apidevtools/swagger-parser");

(async () => {
  for (const file of process.argv.slice(2)) {
    try {
      const api = await SwaggerParser.validate(file);
      console.log(`valid ${file} ${api.openapi}`);
    } catch (err) {
      console.error(`invalid ${file}: ${err.message}`);
      process.exitCode = 1;
    }
  }
})();
