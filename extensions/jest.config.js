// Unit tests of the pure parts (diff, file parsing, plot geometry, notebook
// content) and of the DOM views in jsdom; the JupyterLab wiring (index.ts,
// widgets.ts) is exercised by the project's real-browser test.
module.exports = {
  testEnvironment: 'jsdom',
  testRegex: 'src/__tests__/.*\\.spec\\.ts$',
  transform: {
    '^.+\\.ts$': ['ts-jest', { tsconfig: 'tsconfig.test.json' }]
  },
  moduleFileExtensions: ['ts', 'js', 'json']
};
