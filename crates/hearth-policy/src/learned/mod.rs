//! Policies that learn while they run: GL-Cache, LRB and 3L-Cache. Each gathers its
//! own training data from the requests it sees, trains a gradient-boosted
//! tree model on it from time to time and evicts by the model's predictions,
//! as the papers do; until the first model they evict by a fixed rule (FIFO
//! merges for GL-Cache, LRU for LRB and 3L-Cache).
//!
//! The model is forust-ml's gradient booster (XGBoost's histogram
//! algorithm, pure Rust), trained single-threaded so that training neither
//! competes with other runs for cores nor depends on thread timing: the same
//! requests and seed give the same model, hence the same misses.

use std::time::{Duration, Instant};

use forust_ml::objective::ObjectiveType;
use forust_ml::sampler::SampleMethod;
use forust_ml::{GradientBooster, Matrix};

pub mod glcache;
pub mod lrb;
pub mod threelcache;

/// How often and how long a policy trained, for reports. Wall-clock time
/// is measured only: no decision reads it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Training {
    /// Models trained so far.
    pub models: u32,
    /// Rows (samples) they were trained on, summed.
    pub rows: u64,
    /// Wall-clock time spent training them.
    pub time: Duration,
}

/// The shape of the trees a policy trains.
#[derive(Clone, Copy, Debug)]
pub(crate) struct TreeParams {
    pub iterations: usize,
    pub max_depth: usize,
    pub learning_rate: f32,
    /// Histogram bins per feature: fewer bins train faster.
    pub bins: u16,
    /// Share of rows each tree is trained on, drawn from `seed`.
    pub subsample: f32,
    /// Share of features each tree may split on, drawn from `seed`.
    pub colsample: f64,
    pub seed: u64,
}

/// A feature matrix filled a row at a time and handed to the booster
/// column by column (forust's layout).
pub(crate) struct Rows {
    features: usize,
    /// Row-major values.
    values: Vec<f64>,
    columns: Vec<f64>,
}

impl Rows {
    pub fn new(features: usize) -> Self {
        Rows { features, values: Vec::new(), columns: Vec::new() }
    }
    pub fn len(&self) -> usize {
        self.values.len() / self.features
    }
    pub fn clear(&mut self) {
        self.values.clear();
    }
    pub fn push(&mut self, row: &[f64]) {
        debug_assert_eq!(row.len(), self.features);
        self.values.extend_from_slice(row);
    }
    /// The rows as a column-major matrix.
    fn matrix(&mut self) -> Matrix<'_, f64> {
        let rows = self.len();
        self.columns.clear();
        self.columns.resize(self.values.len(), 0.0);
        for (r, row) in self.values.chunks_exact(self.features).enumerate() {
            for (c, &v) in row.iter().enumerate() {
                self.columns[c * rows + r] = v;
            }
        }
        Matrix::new(&self.columns, rows, self.features)
    }
}

/// A regression model of gradient-boosted trees, retrained from scratch on
/// each batch.
pub(crate) struct Model {
    params: TreeParams,
    booster: Option<GradientBooster>,
    training: Training,
}

impl Model {
    pub fn new(params: TreeParams) -> Self {
        Model { params, booster: None, training: Training::default() }
    }

    pub fn is_trained(&self) -> bool {
        self.booster.is_some()
    }

    pub fn training(&self) -> Training {
        self.training
    }

    /// Trains a new model on `x` and `y` (squared loss). The previous model
    /// stays if the booster refuses the data.
    pub fn train(&mut self, x: &mut Rows, y: &[f64]) {
        debug_assert_eq!(x.len(), y.len());
        if y.len() < 2 {
            return;
        }
        let started = Instant::now();
        let p = self.params;
        let mut booster = GradientBooster::default()
            .set_objective_type(ObjectiveType::SquaredLoss)
            .set_iterations(p.iterations)
            .set_max_depth(p.max_depth)
            .set_learning_rate(p.learning_rate)
            .set_nbins(p.bins)
            .set_subsample(p.subsample)
            .set_sample_method(if p.subsample < 1.0 { SampleMethod::Random } else { SampleMethod::None })
            .set_colsample_bytree(p.colsample)
            .set_seed(p.seed)
            .set_parallel(false);
        let weights = vec![1.0; y.len()];
        if booster.fit(&x.matrix(), y, &weights, None).is_ok() {
            self.booster = Some(booster);
            self.training.models += 1;
            self.training.rows += y.len() as u64;
            // Each model's subsample differs from the last one's.
            self.params.seed = self.params.seed.wrapping_add(1);
        }
        self.training.time += started.elapsed();
    }

    /// The model's prediction for each of `x`'s rows (empty before the first
    /// model), row by row: the booster's own `predict` would first copy
    /// them column by column, which costs more than the trees on a few rows.
    pub fn predict(&self, x: &Rows) -> Vec<f64> {
        let Some(booster) = &self.booster else { return Vec::new() };
        x.values
            .chunks_exact(x.features)
            .map(|row| {
                booster.base_score
                    + booster
                        .trees
                        .iter()
                        .map(|tree| tree.predict_row_from_row_slice(row, &booster.missing))
                        .sum::<f64>()
            })
            .collect()
    }
}
